#include "common/duration.h"

#include <fmt/format.h>

namespace hora {

std::string format_duration(std::chrono::milliseconds d) {
  const long long ms = d.count() < 0 ? 0 : d.count();
  if (ms < 1000) return fmt::format("{} ms", ms);
  const long long tenths = (ms + 50) / 100;
  if (tenths % 10 == 0) return fmt::format("{} s", tenths / 10);
  return fmt::format("{}.{} s", tenths / 10, tenths % 10);
}

}  // namespace hora
