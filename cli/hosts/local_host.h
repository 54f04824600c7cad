// Which host names and addresses are this machine, so that `-H localhost:2,$(hostname):2` runs
// those ranks without SSH (unless --force-ssh). The system is asked once (discover()); the
// matching itself is pure, so tests build a LocalHost by hand.
#pragma once

#include <set>
#include <string>

namespace hora::cli {

class LocalHost {
 public:
  // gethostname() (full and up to the first dot) and every address of every interface.
  // Names are not resolved through DNS here: a name that is neither `localhost`, this
  // machine's name nor a literal local address is treated as remote.
  static LocalHost discover();

  LocalHost(std::set<std::string> names, std::set<std::string> addresses);

  // True for localhost-style names, 127.0.0.0/8, ::1, this machine's names (case-insensitive)
  // and its interface addresses.
  bool is_local(const std::string& name) const;

 private:
  std::set<std::string> names_;      // lower case
  std::set<std::string> addresses_;  // canonical text form
};

}  // namespace hora::cli
