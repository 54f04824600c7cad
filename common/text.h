// Small text helpers shared by the launcher, ssh/ and the runtime: trimming, ASCII lower case,
// and how errors and logs name a rank.
#pragma once

#include <string>
#include <string_view>

namespace hora {

// What trim() removes by default: the characters std::isspace accepts in the C locale (space,
// tab, newline, vertical tab, form feed, carriage return). A caller whose format blanks fewer
// (YAML: space and tab) passes its own set.
inline constexpr std::string_view kWhitespace = " \t\n\v\f\r";

// `s` without its leading and trailing characters from `whitespace`; a view into `s`.
std::string_view trim(std::string_view s, std::string_view whitespace = kWhitespace);
// `s` without its trailing characters from `whitespace`; a view into `s`.
std::string_view trim_end(std::string_view s, std::string_view whitespace = kWhitespace);

// `s` with ASCII A-Z as a-z; every other byte as it is (no locale).
std::string lower(std::string_view s);

// "rank 3 on server1" ("rank 3" when `host` is empty): how errors and logs name a rank, in the
// launcher and in the ranks alike.
std::string rank_name(int rank, std::string_view host);
// "rank 3 of 8 on server1" ("rank 3 of 8" when `host` is empty): with the job's size.
std::string rank_name(int rank, int size, std::string_view host);

}  // namespace hora
