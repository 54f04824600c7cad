#include "common/text.h"

#include <fmt/format.h>

namespace hora {

std::string_view trim(std::string_view s, std::string_view whitespace) {
  const std::size_t b = s.find_first_not_of(whitespace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(whitespace) - b + 1);
}

std::string_view trim_end(std::string_view s, std::string_view whitespace) {
  const std::size_t e = s.find_last_not_of(whitespace);
  return e == std::string_view::npos ? std::string_view{} : s.substr(0, e + 1);
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string rank_name(int rank, std::string_view host) {
  if (host.empty()) return fmt::format("rank {}", rank);
  return fmt::format("rank {} on {}", rank, host);
}

std::string rank_name(int rank, int size, std::string_view host) {
  if (host.empty()) return fmt::format("rank {} of {}", rank, size);
  return fmt::format("rank {} of {} on {}", rank, size, host);
}

}  // namespace hora
