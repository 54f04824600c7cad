#include "rendezvous/secret.h"

#include <openssl/err.h>
#include <openssl/rand.h>

#include <fmt/format.h>

#include "rendezvous/errors.h"

namespace hora::rdv {

namespace {
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

Secret generate_secret() {
  Secret s{};
  if (RAND_bytes(s.data(), static_cast<int>(s.size())) != 1) {
    throw Error(
        fmt::format("could not generate the job secret: OpenSSL RAND_bytes failed "
                    "(error 0x{:x})",
                    ERR_get_error()));
  }
  return s;
}

std::string secret_to_hex(const Secret& secret) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(secret.size() * 2);
  for (std::uint8_t b : secret) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 0xf]);
  }
  return out;
}

Secret parse_secret_hex(std::string_view hex, std::string_view origin) {
  Secret s{};
  if (hex.size() != s.size() * 2) {
    throw Error(
        fmt::format("{} must be {} hex digits (a {}-byte job secret), but it has {} "
                    "characters; it is set by horarun, do not set it by hand",
                    origin, s.size() * 2, s.size(), hex.size()));
  }
  for (std::size_t i = 0; i < s.size(); ++i) {
    int hi = hex_value(hex[2 * i]);
    int lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      throw Error(
          fmt::format("{} must be {} hex digits, but character {} is not a hex digit; "
                      "it is set by horarun, do not set it by hand",
                      origin, s.size() * 2, hi < 0 ? 2 * i + 1 : 2 * i + 2));
    }
    s[i] = static_cast<std::uint8_t>(hi << 4 | lo);
  }
  return s;
}

}  // namespace hora::rdv
