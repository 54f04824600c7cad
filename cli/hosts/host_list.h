// Host lists: `-H a:2,b:4` and hostfiles (`host slots=N`), parsed into HostSpec entries.
//
// Accepted forms of one -H item (horovodrun accepts only the first two):
//   host            one slot
//   host:4          four slots
//   user@host:4     log in as `user` (used by SSH; the rank still sees HORA_HOSTNAME=host)
//   [fe80::1]:4     IPv6 address in brackets (a bare address would be ambiguous with ':slots')
// Hostfile lines: `host slots=N [max_slots=M]` (Open MPI's form), or `host:N` (MPICH's and Intel
// MPI's, which the Kubernetes MPI Operator writes for them), where host takes the -H forms; a bare
// `host` is one slot; `#` starts a comment; blank lines are skipped.
// Every error names the bad item or line and shows the expected form.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hora::cli {

struct HostSpec {
  static constexpr int kMaxSlots = 1 << 16;

  std::string user;  // empty: the SSH default (ssh_config, then the current user)
  std::string name;  // host name or address as given (IPv6 without brackets)
  int slots = 1;

  // `name`, bracketed when it is an IPv6 address: what goes before ":port" or ":slots".
  std::string address_for_display() const;
  bool operator==(const HostSpec&) const = default;
};

// Parses the argument of -H/--hosts. Throws UsageError naming the bad item.
std::vector<HostSpec> parse_host_list(std::string_view text);

// Parses a hostfile's contents; `source` (the file name) is used in messages.
std::vector<HostSpec> parse_hostfile(std::string_view contents, const std::string& source);

// Reads and parses a hostfile. Throws UsageError when it cannot be read.
std::vector<HostSpec> read_hostfile(const std::string& path);

// The slots of every host together, in 64 bits: 32,768 hosts of kMaxSlots do not fit an int.
long long total_slots(const std::vector<HostSpec>& hosts);

}  // namespace hora::cli
