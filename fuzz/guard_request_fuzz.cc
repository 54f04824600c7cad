// libFuzzer harness: the guard's stdin request parser (cli/spawn/guard_request.h), what a guard
// does with the bytes the launcher (or anything else) writes to its stdin. Properties checked:
//   * decode either throws GuardProtocolError, returns nullopt (incomplete), or returns a request
//     with a command and `consumed` within the input;
//   * a complete request is incomplete (nullopt, no error) at every shorter prefix, as a stream
//     that arrives in pieces must be;
//   * a decoded request that can be encoded again decodes to the same request.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cli/base/errors.h"
#include "cli/spawn/guard_request.h"
#include "fuzz/fuzz_check.h"

using hora::cli::GuardProtocolError;
using hora::cli::GuardRequest;

namespace {

bool same(const GuardRequest& a, const GuardRequest& b) {
  return a.cwd == b.cwd && a.env == b.env && a.argv == b.argv && a.grace == b.grace;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::size_t consumed = 0;
  std::optional<GuardRequest> request;
  try {
    request = GuardRequest::decode(text, consumed);
  } catch (const GuardProtocolError&) {
    return 0;
  }
  if (!request) return 0;
  FUZZ_CHECK(consumed > 0 && consumed <= size);
  FUZZ_CHECK(!request->argv.empty());

  // A few shorter prefixes (every one would make the harness quadratic).
  for (std::size_t cut : {consumed - 1, consumed / 2, std::min<std::size_t>(consumed, 5)}) {
    if (cut >= consumed) continue;
    std::size_t c = 0;
    try {
      FUZZ_CHECK(!GuardRequest::decode(text.substr(0, cut), c).has_value());
    } catch (const GuardProtocolError& e) {
      std::fprintf(stderr, "prefix of %zu bytes of a valid request: %s\n", cut, e.what());
      FUZZ_CHECK(!"a prefix of a valid request is incomplete, not an error");
    }
  }

  std::string encoded;
  try {
    encoded = request->encode();
  } catch (const GuardProtocolError&) {
    return 0;  // a value encode() refuses (NUL byte, ...), which decode may accept
  }
  std::size_t c2 = 0;
  const std::optional<GuardRequest> again = GuardRequest::decode(encoded, c2);
  FUZZ_CHECK(again.has_value());
  FUZZ_CHECK(c2 == encoded.size());
  FUZZ_CHECK(same(*again, *request));
  return 0;
}
