// Wording shared by this library's messages.
#pragma once

#include <chrono>
#include <string>

#include "common/duration.h"

namespace hora::ssh {

// "30 s", "1.5 s", "250 ms": the one spelling in common/duration.h. Kept visible as
// ssh::format_duration for callers that spell it so; new code says hora::format_duration.
using hora::format_duration;

// Shell-quotes `s` for a POSIX shell: 'it'\''s' style, unquoted when only safe characters.
std::string shell_quote(const std::string& s);

}  // namespace hora::ssh
