#include "rendezvous/format.h"

#include <fmt/format.h>

namespace hora::rdv {

std::string format_ranks(const std::vector<int>& ranks, int size) {
  return fmt::format("{} {} of {}", ranks.size() == 1 ? "rank" : "ranks", format_rank_list(ranks),
                     size);
}

std::string format_rank_list(const std::vector<int>& ranks) {
  constexpr std::size_t kMaxEntries = 32;
  std::string out;
  std::size_t entries = 0;
  std::size_t i = 0;
  while (i < ranks.size()) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (entries == kMaxEntries) {
      out += fmt::format(", and {} more", ranks.size() - i);
      break;
    }
    if (entries > 0) out += ", ";
    if (j == i) {
      out += fmt::format("{}", ranks[i]);
    } else {
      out += fmt::format("{}-{}", ranks[i], ranks[j]);
    }
    ++entries;
    i = j + 1;
  }
  return out;
}

std::string format_endpoint(const std::string& host, unsigned port) {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

}  // namespace hora::rdv
