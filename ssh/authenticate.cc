// Session::authenticate(): public-key login without a password, in steps. The server's methods
// are asked first; then every ssh-agent key (filtered by IdentitiesOnly), then every identity
// file. Each refusal is recorded in AuthAttempts, and when nothing worked the failure message
// lists every attempt and the fix that matches the failures.
#include <libssh2.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ssh/errors.h"
#include "ssh/key_file.h"
#include "ssh/libssh2_errors.h"
#include "ssh/session.h"

namespace hora::ssh {

// What authenticate() tried so far, for the failure message.
struct Session::AuthAttempts {
  std::string user;
  std::string who;      // "user@host (addr)"
  std::string methods;  // the server's list, "publickey,password"
  std::vector<std::string> tried;
  std::size_t agent_notes = 0;  // entries of `tried` about the agent itself, not a refused key
  bool connection_gone = false;
  // Fingerprints of the identity files' .pub halves, for IdentitiesOnly.
  std::vector<std::string> allowed_fps;
  bool any_file = false;
  // Key files libssh2 cannot use as they are: passphrase-protected (`locked`, seen from the file
  // itself, never offered) or failing to load. The fix for these is ssh-agent, not
  // authorized_keys.
  std::vector<std::string> locked;
  std::vector<std::string> unloadable;

  // Notes a failed attempt's code; true once the server has closed the connection.
  bool gone(int code) {
    if (is_session_fatal(code) && code != LIBSSH2_ERROR_AUTHENTICATION_FAILED &&
        code != LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED && code != LIBSSH2_ERROR_FILE) {
      connection_gone = true;
    }
    return connection_gone;
  }
};

void Session::authenticate(Clock::time_point deadline) {
  AuthAttempts a;
  a.user = target_.user;
  char* list = nullptr;
  await(
      [&] {
        list =
            libssh2_userauth_list(session_, a.user.c_str(), static_cast<unsigned>(a.user.size()));
        return list != nullptr ? 0 : libssh2_session_last_errno(session_);
      },
      deadline, "authentication");
  if (libssh2_userauth_authenticated(session_)) {
    auth_method_ = "none (the server asked for no authentication)";
    return;
  }
  a.who = a.user + "@" + target_.describe();
  if (list == nullptr) {
    throw AuthError(a.who +
                    ": cannot ask the server for its authentication methods: " + last_error());
  }
  a.methods = list;
  if (a.methods.find("publickey") == std::string::npos) {
    throw AuthError(
        a.who + ": the server accepts only " + a.methods +
        "; hora logs in without passwords (public keys from ssh-agent or key files). Set up key "
        "authentication for " +
        a.user + " on " + target_.alias);
  }
  if (target_.identities_only) {
    for (const std::string& f : target_.identity_files) {
      if (auto fp = pub_file_fingerprint(f + ".pub"); !fp.empty()) a.allowed_fps.push_back(fp);
    }
  }
  if (!options_.agent_socket.empty() && authenticate_with_agent(a, deadline)) return;
  for (const std::string& file : target_.identity_files) {
    if (a.connection_gone) break;
    if (authenticate_with_key_file(a, file, deadline)) return;
  }
  throw_auth_failure(a);
}

// Offers every key of the agent at options_.agent_socket; true once one was accepted.
bool Session::authenticate_with_agent(AuthAttempts& a, Clock::time_point deadline) {
  LIBSSH2_AGENT* agent = libssh2_agent_init(session_);
  struct AgentCloser {
    LIBSSH2_AGENT* a;
    ~AgentCloser() {
      if (a != nullptr) {
        libssh2_agent_disconnect(a);
        libssh2_agent_free(a);
      }
    }
  } closer{agent};
  const std::string where = "ssh-agent at " + options_.agent_socket;
  if (agent == nullptr) {
    a.tried.push_back(where + ": cannot initialise");
    ++a.agent_notes;
    return false;
  }
  libssh2_agent_set_identity_path(agent, options_.agent_socket.c_str());
  if (libssh2_agent_connect(agent) != 0) {
    a.tried.push_back(where + ": cannot connect (" + last_error() + "; is SSH_AUTH_SOCK stale?)");
    ++a.agent_notes;
    return false;
  }
  if (libssh2_agent_list_identities(agent) != 0) {
    a.tried.push_back(where + ": cannot list its keys (" + last_error() + ")");
    ++a.agent_notes;
    return false;
  }
  libssh2_agent_publickey* id = nullptr;
  libssh2_agent_publickey* prev = nullptr;
  int offered = 0;
  while (!a.connection_gone && libssh2_agent_get_identity(agent, &id, prev) == 0) {
    prev = id;
    std::string desc;
    try {
      const HostKey key =
          HostKey::from_blob(std::string(reinterpret_cast<char*>(id->blob), id->blob_len));
      if (target_.identities_only && std::find(a.allowed_fps.begin(), a.allowed_fps.end(),
                                               key.fingerprint()) == a.allowed_fps.end()) {
        continue;  // IdentitiesOnly: only agent keys that belong to a configured key file
      }
      desc = key.type + " " + key.fingerprint();
    } catch (const Error&) {
      desc = "unparsable key";
    }
    if (id->comment != nullptr && *id->comment != '\0')
      desc += " (" + std::string(id->comment) + ")";
    ++offered;
    const int rc = await([&] { return libssh2_agent_userauth(agent, a.user.c_str(), id); },
                         deadline, "authentication with ssh-agent");
    if (rc == 0) {
      auth_method_ = "ssh-agent key " + desc;
      return true;
    }
    a.tried.push_back("ssh-agent key " + desc + ": refused");
    a.gone(rc);
  }
  if (offered == 0) {
    a.tried.push_back(where + ": no usable keys" +
                      std::string(target_.identities_only
                                      ? " matching IdentityFile (IdentitiesOnly yes)"
                                      : " (add one with ssh-add)"));
    ++a.agent_notes;
  }
  return false;
}

// Offers one identity file (unless it is missing or passphrase-protected); true if accepted.
bool Session::authenticate_with_key_file(AuthAttempts& a, const std::string& file,
                                         Clock::time_point deadline) {
  if (!file_exists(file)) {
    if (!target_.identity_files_are_defaults) a.tried.push_back("key file " + file + ": not found");
    return false;
  }
  a.any_file = true;
  if (key_file_is_encrypted(file)) {
    a.locked.push_back(file);
    a.tried.push_back("key file " + file +
                      ": protected by a passphrase, which hora cannot ask for (no terminal)");
    return false;
  }
  const std::string pub = file + ".pub";
  const bool have_pub = file_exists(pub);
  const int rc = await(
      [&] {
        return libssh2_userauth_publickey_fromfile_ex(session_, a.user.c_str(),
                                                      static_cast<unsigned>(a.user.size()),
                                                      have_pub ? pub.c_str() : nullptr,
                                                      file.c_str(), "");
      },
      deadline, "authentication with key files");
  if (rc == 0) {
    auth_method_ = "key file " + file;
    return true;
  }
  const std::string err = last_error();
  // With a .pub file, libssh2 offers the public key first and reads the private key only to
  // sign once the server accepted it; a private key it cannot read then fails in its signing
  // callback ("Callback returned error") with the code the server's refusals also use.
  const bool sign_failed = rc == LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED &&
                           err.find("Callback returned error") != std::string::npos;
  if (rc == LIBSSH2_ERROR_FILE || rc == LIBSSH2_ERROR_KEYFILE_AUTH_FAILED || sign_failed) {
    a.unloadable.push_back(file);
    a.tried.push_back(
        "key file " + file + ": " +
        (sign_failed
             ? "the server accepts its public key " + pub +
                   ", but libssh2 cannot load the private key (unknown format, or a passphrase)"
             : "libssh2 cannot load it (" + err + ")"));
  } else {
    std::string why = "key file " + file + ": refused by the server";
    // libssh2 before 1.11 signs RSA user keys with ssh-rsa (SHA-1) only, which OpenSSH 8.8+
    // refuses unless PubkeyAcceptedAlgorithms allows it; say so rather than leave a mystery.
    if (have_pub && LIBSSH2_VERSION_NUM < 0x010b00 &&
        read_first_line(pub).rfind("ssh-rsa ", 0) == 0) {
      why += " (an RSA key: this libssh2 " LIBSSH2_VERSION
             " can only sign with ssh-rsa/SHA-1, which OpenSSH 8.8+ refuses by default; use an "
             "ed25519 or "
             "ECDSA key, or allow PubkeyAcceptedAlgorithms +ssh-rsa on the server)";
    }
    a.tried.push_back(why);
  }
  a.gone(rc);
  return false;
}

// Every attempt, what the server accepts, and the fixes that match the failures.
void Session::throw_auth_failure(AuthAttempts& a) const {
  std::string msg = "authentication failed for " + a.who + ". Tried: ";
  if (!a.any_file && target_.identity_files_are_defaults) {
    a.tried.push_back("no key files (none of the defaults exist: " + target_.identity_files[0] +
                      ", id_ecdsa, id_rsa)");
  }
  // Whether anything failed for a reason authorized_keys (or another key) would fix.
  const bool other_failures =
      a.tried.size() > a.locked.size() + a.unloadable.size() + a.agent_notes;
  if (options_.agent_socket.empty())
    a.tried.insert(a.tried.begin(), "no ssh-agent (SSH_AUTH_SOCK is not set)");
  for (std::size_t i = 0; i < a.tried.size(); ++i) msg += (i ? "; " : "") + a.tried[i];
  msg += ". The server accepts: " + a.methods + ".";
  if (a.connection_gone) {
    msg += " The server closed the connection after these attempts (sshd's MaxAuthTries?): " +
           last_error() + ".";
  }
  auto join = [](const std::vector<std::string>& files) {
    std::string out;
    for (const std::string& f : files) out += (out.empty() ? "" : " ") + f;
    return out;
  };
  std::vector<std::string> fixes;
  if (!a.locked.empty()) {
    fixes.push_back(
        "load the passphrase-protected key" + std::string(a.locked.size() > 1 ? "s" : "") +
        " into ssh-agent (ssh-add " + join(a.locked) +
        ") and run horarun with that agent's SSH_AUTH_SOCK, or use a key without a passphrase");
  }
  if (!a.unloadable.empty()) {
    fixes.push_back(
        "check that ssh-keygen -y -f " + a.unloadable.front() +
        " reads the key; if it asks for a passphrase, load the key into ssh-agent (ssh-add " +
        join(a.unloadable) + ") or use a key without a passphrase");
  }
  if (other_failures || fixes.empty()) {
    fixes.push_back(
        "authorise one of these public keys in ~" + a.user + "/.ssh/authorized_keys on " +
        target_.alias +
        " (ssh-copy-id), or name the right key with -i/--ssh-identity-file or IdentityFile in "
        "ssh_config, or load it into ssh-agent");
  }
  msg += " Fix: ";
  for (std::size_t i = 0; i < fixes.size(); ++i) msg += (i ? "; or " : "") + fixes[i];
  msg += ".";
  throw AuthError(msg);
}

}  // namespace hora::ssh
