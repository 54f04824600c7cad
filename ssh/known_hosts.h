// known_hosts files as OpenSSH reads and writes them, and the host key policy
// (StrictHostKeyChecking) the Session applies after the key exchange.
//
// Format, one entry per line (OpenSSH sshd(8) "SSH_KNOWN_HOSTS FILE FORMAT"):
//   [@revoked|@cert-authority] host-patterns key-type base64-key [comment]
// host-patterns is a comma-separated list of names, `*`/`?` patterns, `!negations` and hashed
// names (`|1|base64 salt|base64 HMAC-SHA1(salt, name)`). A host on a port other than 22 is
// written `[host]:port`. Lines starting with `#` and blank lines are ignored; @cert-authority
// lines are skipped (hora does not do host certificates).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hora::ssh {

// What to do with a server's host key (ssh_config StrictHostKeyChecking, horarun
// --ssh-strict-host-key-checking):
//   kYes        the key must already be in a known_hosts file;
//   kAcceptNew  unknown hosts are recorded in the first UserKnownHostsFile; changed keys refused;
//   kNo         unknown hosts are recorded, changed keys are accepted with a warning.
// A revoked key is refused under every policy.
enum class HostKeyPolicy { kYes, kAcceptNew, kNo };

// "yes"/"ask"/"true" -> kYes, "accept-new" -> kAcceptNew, "no"/"off"/"false" -> kNo
// (case-insensitive, as ssh_config). Throws ConfigError naming `where` for anything else.
HostKeyPolicy parse_host_key_policy(std::string_view value, std::string_view where);
std::string_view to_string(HostKeyPolicy policy);  // "yes", "accept-new", "no"

// A public key as sent on the wire: `blob` is the SSH wire encoding (string type, then the
// type-specific fields); `type` is the algorithm name inside it ("ssh-ed25519").
struct HostKey {
  std::string type;
  std::string blob;

  // Parses the type from the blob; throws Error when the blob is malformed.
  static HostKey from_blob(std::string blob);
  // From a known_hosts / .pub line's "type base64" fields; throws Error on bad base64.
  static HostKey from_base64(std::string_view type, std::string_view base64);

  std::string base64() const;
  // OpenSSH's fingerprint form: "SHA256:" + unpadded base64 of SHA-256(blob), as `ssh-keygen -l`.
  std::string fingerprint() const;
  bool operator==(const HostKey&) const = default;
};

// The name a host is looked up and recorded under: "host" for port 22, else "[host]:port".
// IPv6 addresses keep their colons inside the brackets: "[fe80::1]:2222". Lowercased.
std::string known_hosts_name(std::string_view host, int port);

// Base64 (RFC 4648, with padding on encode; decode accepts missing padding). Decode throws Error.
std::string base64_encode(std::string_view bytes);
std::string base64_decode(std::string_view text);

// True the first time this process asks about `file`, false afterwards: a known_hosts file that
// cannot be written is warned about once, not once per host.
bool first_unwritable_report(const std::string& file);

class KnownHosts {
 public:
  enum class Status {
    kKnown,    // an entry for this host has exactly this key
    kNew,      // no entry for this host with a key of this type
    kChanged,  // entries for this host have a key of this type, but a different one
    kRevoked,  // the key is marked @revoked
  };
  struct Entry {
    std::string file;
    int line = 0;
    HostKey key;
  };
  struct Lookup {
    Status status = Status::kNew;
    // kKnown: the matching entry; kChanged: the first entry with the same type and another key;
    // kRevoked: the @revoked entry.
    Entry entry;
  };

  // Reads every file that exists; a missing file is an empty one (as in OpenSSH). Malformed lines
  // are skipped. Throws Error when a file exists but cannot be read.
  explicit KnownHosts(std::vector<std::string> files);

  // `name` as produced by known_hosts_name(). Pure: no I/O.
  Lookup check(std::string_view name, const HostKey& key) const;

  // Key types known for `name`, in file order, without duplicates (a Session lists these host
  // key algorithms first so the server offers a key we can verify, as OpenSSH does).
  std::vector<std::string> known_types(std::string_view name) const;

  // Appends "name type base64" to `file` (creating it and its directory, mode 0600/0700) with a
  // single write(O_APPEND), so concurrent sessions recording different hosts do not interleave.
  // Also adds the entry to this object. Throws Error naming the file when it cannot be written.
  void add(const std::string& file, std::string_view name, const HostKey& key);

  // add(), except that a file that cannot be written (a read-only mount such as a Kubernetes
  // Secret at ~/.ssh) does not stop the connection, as in OpenSSH ("Failed to add the host to the
  // list of known hosts"): the entry is kept in this object only. Returns "" when the file was
  // written, else why not (the file and the system's reason).
  std::string add_or_remember(const std::string& file, std::string_view name, const HostKey& key);

  const std::vector<std::string>& files() const { return files_; }

 private:
  struct Line {
    std::string file;
    int line = 0;
    bool revoked = false;
    std::string hosts;  // the comma-separated host field, as written
    HostKey key;
  };
  bool host_matches(const Line& line, std::string_view name) const;
  void remember(const std::string& file, std::string_view name, const HostKey& key);

  std::vector<std::string> files_;
  std::vector<Line> lines_;
};

}  // namespace hora::ssh
