// libFuzzer harness: the agent protocol's frame decoder (cli/agent/frame.h), what the agent does
// with the bytes on its stdin and the launcher with the agent's stdout. Properties checked:
//   * fed in one piece or byte by byte, the decoder yields the same frames and the same error;
//   * every frame it yields has a known type and a payload within kMaxPayload, and re-encoding
//     the frames gives back the consumed prefix of the input;
//   * decode_open / decode_exit never crash, and what decode_open accepts encodes back to itself;
//   * the fan-out tree's payloads (cli/agent/relay.h): decode_relay_open / decode_relay_ready never
//     crash, and what they accept survives an encode-decode round trip unchanged.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cli/agent/frame.h"
#include "cli/agent/relay.h"
#include "fuzz/fuzz_check.h"

using namespace hora::cli::agent;

namespace {

std::vector<Frame> decode_all(std::string_view in, std::size_t step, std::string& error) {
  FrameDecoder d;
  std::vector<Frame> out;
  for (std::size_t i = 0; i < in.size(); i += step) {
    d.feed(in.substr(i, step));
    while (auto f = d.next()) out.push_back(std::move(*f));
  }
  error = d.error();
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  std::string e1, e2;
  const std::vector<Frame> whole = decode_all(in, in.empty() ? 1 : in.size(), e1);
  const std::vector<Frame> bytes = decode_all(in, 1, e2);
  FUZZ_CHECK(e1 == e2);
  FUZZ_CHECK(whole.size() == bytes.size());
  std::string again;
  for (std::size_t i = 0; i < whole.size(); ++i) {
    const Frame& f = whole[i];
    FUZZ_CHECK(f.type == bytes[i].type && f.id == bytes[i].id && f.payload == bytes[i].payload);
    FUZZ_CHECK(known_type(static_cast<std::uint8_t>(f.type)));
    FUZZ_CHECK(f.payload.size() <= kMaxPayload);
    append_frame(again, f.type, f.id, f.payload);
    if (f.type == FrameType::kOpen) {
      if (const auto open = decode_open(f.payload)) {
        FUZZ_CHECK(!open->args.empty());
        FUZZ_CHECK(encode_open(*open) == f.payload);
      }
    }
    (void)decode_exit(f.payload);
    if (const auto open = decode_relay_open(f.payload)) {
      const std::string once = encode_relay_open(*open);
      const auto back = decode_relay_open(once);
      FUZZ_CHECK(back.has_value() && encode_relay_open(*back) == once);
    }
    if (const auto ready = decode_relay_ready(f.payload)) {
      const std::string once = encode_relay_ready(*ready);
      const auto back = decode_relay_ready(once);
      FUZZ_CHECK(back.has_value() && encode_relay_ready(*back) == once);
    }
  }
  FUZZ_CHECK(in.substr(0, again.size()) == again);
  return 0;
}
