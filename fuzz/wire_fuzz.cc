// libFuzzer harness: the rendezvous frame decoder (rendezvous/wire.h), i.e. what the server and
// the client do with bytes from the network. The input is one frame: a 16-byte header, then the
// payload. Properties checked:
//   * decode_header never fails other than by returning a rejection status (no crash, no throw);
//   * an accepted header re-encodes to the same 16 bytes and fits max_frame_bytes;
//   * every payload decoder either throws DecodeError or returns a value that re-encodes to
//     exactly the payload (the formats have one encoding; trailing bytes are an error).
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "rendezvous/wire.h"

namespace wire = hora::rdv::wire;
using wire::Bytes;

namespace {

bool same(const Bytes& a, std::span<const std::uint8_t> b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

// Runs `decode`, and when it accepts the payload checks that `encode` gives the payload back.
template <typename Decode, typename Encode>
void round_trip(std::span<const std::uint8_t> payload, Decode decode, Encode encode) {
  try {
    auto value = decode(payload);
    FUZZ_CHECK(same(encode(value), payload));
  } catch (const wire::DecodeError&) {
  }
}

void check_header(std::span<const std::uint8_t, wire::kHeaderBytes> head, std::size_t max_frame) {
  wire::Header h;
  std::string why;
  const wire::Status st = wire::decode_header(head, max_frame, &h, &why);
  if (st != wire::Status::kOk) {
    FUZZ_CHECK(!why.empty());
    FUZZ_CHECK(wire::is_known_status(static_cast<std::uint8_t>(st)));
    return;
  }
  FUZZ_CHECK(wire::kHeaderBytes + std::size_t{h.payload_bytes} <= max_frame);
  FUZZ_CHECK(wire::is_known_op(static_cast<std::uint8_t>(h.op)));
  std::array<std::uint8_t, wire::kHeaderBytes> again{};
  wire::encode_header(h, again.data());
  FUZZ_CHECK(std::equal(again.begin(), again.end(), head.begin()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::array<std::uint8_t, wire::kHeaderBytes> head{};
  std::memcpy(head.data(), data, std::min(size, head.size()));
  check_header(head, wire::kMinMaxFrameBytes);
  check_header(head, wire::kDefaultMaxFrameBytes);

  const std::span<const std::uint8_t> payload(data + std::min(size, wire::kHeaderBytes),
                                              size - std::min(size, wire::kHeaderBytes));
  round_trip(payload, wire::decode_hello, [](const wire::Hello& m) { return wire::encode(m); });
  round_trip(payload, wire::decode_auth,
             [](const wire::AuthRequest& m) { return wire::encode(m); });
  round_trip(payload, wire::decode_reset, [](const wire::Reset& m) { return wire::encode(m); });
  round_trip(payload, wire::decode_set, [](const wire::SetRequest& m) { return wire::encode(m); });
  round_trip(payload, wire::decode_wait,
             [](const wire::WaitRequest& m) { return wire::encode(m); });
  round_trip(payload, wire::decode_add, [](const wire::AddRequest& m) { return wire::encode(m); });
  round_trip(payload, wire::decode_del, [](const wire::DelRequest& m) { return wire::encode(m); });
  round_trip(payload, wire::decode_exchange,
             [](const wire::ExchangeRequest& m) { return wire::encode(m); });
  round_trip(payload, wire::decode_exchange_view, [](const wire::ExchangeView& m) {
    std::vector<Bytes> slices;
    for (auto s : m.slices) slices.emplace_back(s.begin(), s.end());
    return wire::encode_exchange(m.name, m.timeout_ms, slices);
  });
  round_trip(payload, wire::decode_bytes, [](const Bytes& v) { return wire::encode_bytes(v); });
  round_trip(payload, wire::decode_i64, [](std::int64_t v) { return wire::encode_i64(v); });
  round_trip(payload, wire::decode_u8, [](std::uint8_t v) { return wire::encode_u8(v); });
  round_trip(payload, wire::decode_slices, [](const std::vector<Bytes>& v) {
    const Bytes out = wire::encode_slices(v);
    FUZZ_CHECK(out.size() == wire::slices_wire_bytes(v));
    return out;
  });
  round_trip(payload, wire::decode_message,
             [](const std::string& v) { return wire::encode_message(v); });
  // GATHER's answer (records coded against their predecessors: no single encoding, so the records
  // are re-encoded and must decode to the same records and column).
  try {
    const wire::GatherReplyView v = wire::decode_gather_reply(payload);
    Bytes again = wire::encode_gather_records(v.records);
    wire::Writer tail;
    tail.u32(v.width).raw(v.column);
    const Bytes t = tail.take();
    again.insert(again.end(), t.begin(), t.end());
    const wire::GatherReplyView w = wire::decode_gather_reply(again);
    FUZZ_CHECK(w.records.size() == v.records.size() && w.width == v.width);
    for (std::size_t i = 0; i < v.records.size(); ++i) {
      FUZZ_CHECK(same(Bytes(v.records[i].begin(), v.records[i].end()), w.records[i]));
    }
    FUZZ_CHECK(same(Bytes(v.column.begin(), v.column.end()), w.column));
  } catch (const wire::DecodeError&) {
  }
  return 0;
}
