// ssh_config resolution: turns a host as the user wrote it ("server2", "alice@gpu7") into the
// Target a Session connects to, reading ~/.ssh/config the way OpenSSH's ssh(1) does for the
// options hora uses. docs/ssh.md lists what is read; in short:
//
//   * Files: the given file only (horarun --ssh-config, like ssh -F), else ~/.ssh/config then
//     /etc/ssh/ssh_config. A given file must exist; the default ones may be missing.
//   * Lines: `Keyword value` or `Keyword=value`, keywords case-insensitive, `#` comments,
//     "double quotes" around values with spaces. Keywords hora does not use are ignored, except
//     ProxyJump and ProxyCommand: hora only connects directly, so resolve() refuses a host that
//     has one (other than `none`) rather than silently going straight to its HostName.
//   * `Host p1 p2 !p3`: the following lines apply when the host (lowercased, as given, before
//     HostName) matches a pattern (`*`, `?`) and no `!negated` one. Lines before the first Host
//     apply to every host.
//   * `Match`: only `Match all` is understood (applies to every host); any other Match block is
//     skipped entirely, i.e. treated as not matching (hora does not run `Match exec` & co.).
//   * `Include path...`: globs allowed; relative paths are under ~/.ssh (for the system file,
//     /etc/ssh). An Include inside a non-matching Host block contributes nothing. Depth <= 16.
//   * First value wins for every keyword, except IdentityFile, whose values accumulate.
//   * HostName (%h = host as given, %%), User, Port, IdentityFile (~, %d %u %l %L %h %n %p %r
//     %i %%), ConnectTimeout (seconds, or 30s/2m/1h), StrictHostKeyChecking (yes, ask, accept-new,
//     no, off), UserKnownHostsFile (several files, tokens as IdentityFile, `none`),
//     IdentitiesOnly.
//   * Command line overrides (Overrides) win over the files: the user of `user@host`,
//   -p/--ssh-port,
//     --ssh-strict-host-key-checking; -i/--ssh-identity-file files are tried before the configured
//     ones (as ssh -i). Overrides::connect_timeout has no horarun flag: users set ConnectTimeout.
//
// Resolution is pure apart from reading the config files: no name lookup, no network.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ssh/known_hosts.h"

namespace hora::ssh {

inline constexpr int kDefaultPort = 22;
inline constexpr std::chrono::seconds kDefaultConnectTimeout{10};
// horarun's default, not OpenSSH's ("ask"): record new hosts, refuse changed keys.
inline constexpr HostKeyPolicy kDefaultHostKeyPolicy = HostKeyPolicy::kAcceptNew;

// The local side: what ~, %d, %u, %l and %L expand to. current() asks the system
// (getpwuid(getuid()), gethostname); tests build one by hand.
struct LocalIdentity {
  std::string home;      // "/home/alice"
  std::string user;      // "alice"
  std::string uid;       // "1000" (%i)
  std::string hostname;  // "node1.example.org" (%l); %L is its first label

  static LocalIdentity current();
};

// Where ssh_config comes from.
struct ConfigSource {
  // --ssh-config FILE: read only this file (it must exist). "none" reads no file at all.
  // Empty: ~/.ssh/config, then system_file, both optional.
  std::string file;
  std::string system_file = "/etc/ssh/ssh_config";
  LocalIdentity local = LocalIdentity::current();
};

// Values from the command line; set ones win over ssh_config.
struct Overrides {
  std::optional<std::string> user;                      // from user@host (parse_host_spec)
  std::optional<int> port;                              // -p/--ssh-port
  std::vector<std::string> identity_files;              // -i/--ssh-identity-file, tried first
  std::optional<HostKeyPolicy> host_key_policy;         // --ssh-strict-host-key-checking
  std::optional<std::chrono::seconds> connect_timeout;  // for callers; horarun has no flag for it
};

// Everything a Session needs to reach one host, after ssh_config and the overrides.
struct Target {
  std::string alias;     // the host as given, without user@ ("server2"); Host patterns match this
  std::string hostname;  // what to connect to (HostName, else alias)
  std::string user;      // remote user
  int port = kDefaultPort;
  // Key files to try, in order, with ~ and %-tokens expanded. When nothing configured any, these
  // are the defaults ~/.ssh/id_ed25519, id_ecdsa, id_rsa and identity_files_are_defaults is true
  // (the Session then silently skips the ones that do not exist).
  std::vector<std::string> identity_files;
  bool identity_files_are_defaults = false;
  bool identities_only = false;  // IdentitiesOnly: use only agent keys that match identity_files
  std::chrono::seconds connect_timeout = kDefaultConnectTimeout;
  HostKeyPolicy host_key_policy = kDefaultHostKeyPolicy;
  // UserKnownHostsFile, expanded; new keys are recorded in the first. Default ~/.ssh/known_hosts,
  // ~/.ssh/known_hosts2. Empty with `UserKnownHostsFile none`.
  std::vector<std::string> known_hosts_files;

  // Where resolve() found this target, for error messages (a Target built by hand has
  // from_config false and says nothing about ssh_config). config_files: every file read, in
  // order, Includes too; empty when none existed or with --ssh-config none. host_entry: the first
  // Host line that names this host ("file:line"); empty when none did, i.e. the host is not an
  // alias (lines of only wildcards, like `Host *`, name no host).
  bool from_config = false;
  std::vector<std::string> config_files;
  std::string host_entry;

  // "host:port", "[v6addr]:port".
  std::string endpoint() const;
  // For messages: "server2 (10.0.0.2:2222)", or "10.0.0.2:2222" when alias == hostname.
  std::string describe() const;
};

// "alice@server2" -> {alice, server2}; "server2" -> {nullopt, server2}; "[fe80::1]" -> fe80::1.
// The user is what precedes the last '@'. Throws ConfigError on an empty host or user.
struct HostSpec {
  std::optional<std::string> user;
  std::string host;
};
HostSpec parse_host_spec(std::string_view spec);

// Resolves `host_spec` ("host" or "user@host"); a user in the spec wins over overrides.user.
// Throws ConfigError ("file:line: ...") for an unreadable given file, a bad value (Port abc),
// an unknown %-token, or Includes nested too deeply; and ("host: ssh_config sets ProxyJump (line
// N of FILE); ...") when the host has a ProxyJump or ProxyCommand, which hora does not support.
Target resolve(std::string_view host_spec, const Overrides& overrides = {},
               const ConfigSource& source = {});

}  // namespace hora::ssh
