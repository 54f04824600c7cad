#include "ssh/format.h"

#include <cstdio>

namespace hora::ssh {

std::string format_duration(std::chrono::milliseconds d) {
  const long long ms = d.count();
  if (ms < 1000) return std::to_string(ms) + " ms";
  // Tenths of a second, without a trailing ".0": "10 s", "1.5 s" (1001 ms reads "1 s").
  const long long tenths = (ms + 50) / 100;
  if (tenths % 10 == 0) return std::to_string(tenths / 10) + " s";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld.%lld s", tenths / 10, tenths % 10);
  return buf;
}

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
    if (c == '\'') out += "'\\''"; else out += c;
  }
  out += "'";
  return out;
}

}  // namespace hora::ssh
