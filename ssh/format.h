// Wording shared by this library's messages.
#pragma once

#include <chrono>
#include <string>

namespace hora::ssh {

// "10 s", "1.5 s", "250 ms".
std::string format_duration(std::chrono::milliseconds d);

// Shell-quotes `s` for a POSIX shell: 'it'\''s' style, unquoted when only safe characters.
std::string shell_quote(const std::string& s);

}  // namespace hora::ssh
