#include "cli/spawn/shm_cleanup.h"

#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstdlib>
#include <string_view>

#include "common/shm_name.h"
#include "rendezvous/secret.h"

namespace hora::cli {
namespace {

// "<pid>-<n>" -> pid, or -1 when the rest of the name is not that shape.
long creator_pid(std::string_view rest) {
  const auto dash = rest.find('-');
  if (dash == 0 || dash == std::string_view::npos || dash + 1 == rest.size()) return -1;
  const std::string_view pid = rest.substr(0, dash);
  const std::string_view n = rest.substr(dash + 1);
  if (pid.size() > 9 || pid.find_first_not_of("0123456789") != std::string_view::npos ||
      n.find_first_not_of("0123456789") != std::string_view::npos) {
    return -1;
  }
  return std::strtol(std::string(pid).c_str(), nullptr, 10);
}

bool alive(long pid) { return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM; }

}  // namespace

std::optional<std::string> shm_prefix_for(const char* secret_hex, const char* host_index) {
  if (secret_hex == nullptr || host_index == nullptr || *host_index == '\0') return std::nullopt;
  const std::string_view index(host_index);
  if (index.size() > 9 || index.find_first_not_of("0123456789") != std::string_view::npos) {
    return std::nullopt;
  }
  try {
    const rdv::Secret secret = rdv::parse_secret_hex(secret_hex);
    return shm_name_prefix(secret.data(), secret.size(), std::atoi(host_index));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::vector<std::string> remove_orphan_segments(const std::string& prefix, const std::string& dir) {
  std::vector<std::string> removed;
  // The file names in `dir` lack shm_open's leading '/'.
  const std::string file_prefix =
      (prefix.empty() || prefix[0] != '/' ? prefix : prefix.substr(1)) + "-";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return removed;
  std::vector<std::string> names;
  while (const dirent* entry = ::readdir(d)) {
    const std::string_view name(entry->d_name);
    if (name.substr(0, file_prefix.size()) != file_prefix) continue;
    const long pid = creator_pid(name.substr(file_prefix.size()));
    if (pid <= 0 || alive(pid)) continue;
    names.emplace_back(name);
  }
  ::closedir(d);
  for (const std::string& name : names) {
    const std::string path = dir + "/" + name;
    if (::unlink(path.c_str()) == 0) removed.push_back("/" + name);
  }
  return removed;
}

}  // namespace hora::cli
