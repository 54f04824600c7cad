#include "ssh/pattern.h"

#include <cstddef>

namespace hora::ssh {

bool match_pattern(std::string_view s, std::string_view p) {
  // Iterative glob with single-star backtracking: on a mismatch, retry from the last `*` with
  // one more character consumed. Linear in practice, no recursion on hostile patterns.
  std::size_t si = 0, pi = 0;
  std::size_t star = std::string_view::npos, star_s = 0;
  while (si < s.size()) {
    if (pi < p.size() && (p[pi] == '?' || p[pi] == s[si])) {
      ++si;
      ++pi;
    } else if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      star_s = si;
    } else if (star != std::string_view::npos) {
      pi = star + 1;
      si = ++star_s;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

PatternMatch match_pattern_list(std::string_view s, const std::vector<std::string_view>& patterns) {
  bool positive = false;
  for (std::string_view p : patterns) {
    const bool negated = !p.empty() && p.front() == '!';
    if (negated) p.remove_prefix(1);
    if (p.empty() || !match_pattern(s, p)) continue;
    if (negated) return PatternMatch::kNegated;
    positive = true;
  }
  return positive ? PatternMatch::kMatch : PatternMatch::kNone;
}

PatternMatch match_pattern_csv(std::string_view s, std::string_view csv) {
  std::vector<std::string_view> parts;
  while (!csv.empty()) {
    const auto comma = csv.find(',');
    parts.push_back(csv.substr(0, comma));
    if (comma == std::string_view::npos) break;
    csv.remove_prefix(comma + 1);
  }
  return match_pattern_list(s, parts);
}

}  // namespace hora::ssh
