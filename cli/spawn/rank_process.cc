#include <string.h>

#include <fmt/format.h>

#include "cli/spawn/rank_process.h"

namespace hora::cli {

std::string ExitStatus::describe() const {
  if (!signaled) return fmt::format("exited with code {}", code);
  const char* abbrev = ::sigabbrev_np(signal);
  if (abbrev == nullptr) return fmt::format("was killed by signal {}", signal);
  return fmt::format("was killed by signal {} (SIG{})", signal, abbrev);
}

}  // namespace hora::cli
