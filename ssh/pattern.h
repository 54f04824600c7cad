// OpenSSH's host patterns, shared by ssh_config `Host` lines and known_hosts host fields.
#pragma once

#include <string_view>
#include <vector>

namespace hora::ssh {

// Glob match of the whole string: `*` matches any run of characters (also empty), `?` exactly
// one; everything else literally and case-sensitively (callers lowercase host names first,
// as OpenSSH does).
bool match_pattern(std::string_view s, std::string_view pattern);

enum class PatternMatch { kNone, kMatch, kNegated };

// A list of patterns, each optionally negated with a leading `!`. As in OpenSSH: kNegated if any
// negated pattern matches (that wins over every positive one), else kMatch if a positive pattern
// matches, else kNone. A list of only negated patterns therefore never yields kMatch.
PatternMatch match_pattern_list(std::string_view s, const std::vector<std::string_view>& patterns);

// The same for a comma-separated list ("h1,*.lab,!bad.lab"), as in known_hosts lines.
PatternMatch match_pattern_csv(std::string_view s, std::string_view csv);

}  // namespace hora::ssh
