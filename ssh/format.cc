#include "ssh/format.h"

namespace hora::ssh {

std::string shell_quote(const std::string& s) {
  bool safe = !s.empty();
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '.' || c == '/' || c == ',' || c == ':' ||
                    c == '=' || c == '@' || c == '+' || c == '%';
    if (!ok) {
      safe = false;
      break;
    }
  }
  if (safe) return s;
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  out += "'";
  return out;
}

}  // namespace hora::ssh
