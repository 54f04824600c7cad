#include "rendezvous/wire.h"

#include <cstring>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "rendezvous/gather_records.h"

namespace hora::rdv::wire {

namespace {

void put_le(std::uint8_t* out, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out[i] = static_cast<std::uint8_t>(v >> (8 * i));
}

std::uint64_t get_le(const std::uint8_t* in, int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= std::uint64_t{in[i]} << (8 * i);
  return v;
}

template <typename T>
Bytes encode_one(T v, Writer& (Writer::*put)(T)) {
  Writer w;
  (w.*put)(v);
  return w.take();
}

}  // namespace

const char* op_name(Op op) {
  switch (op) {
    case Op::kHello: return "HELLO";
    case Op::kAuth: return "AUTH";
    case Op::kReject: return "REJECT";
    case Op::kAbort: return "ABORT";
    case Op::kGoodbye: return "GOODBYE";
    case Op::kReset: return "RESET";
    case Op::kSet: return "SET";
    case Op::kGet: return "GET";
    case Op::kAdd: return "ADD";
    case Op::kDel: return "DEL";
    case Op::kBarrier: return "BARRIER";
    case Op::kExchange: return "EXCHANGE";
    case Op::kGather: return "GATHER";
  }
  return "UNKNOWN";
}

const char* status_name(Status status) {
  switch (status) {
    case Status::kOk: return "OK";
    case Status::kTimeout: return "TIMEOUT";
    case Status::kInvalid: return "INVALID";
    case Status::kAborted: return "ABORTED";
    case Status::kBadFrame: return "BAD_FRAME";
    case Status::kBadVersion: return "BAD_VERSION";
    case Status::kTooLarge: return "TOO_LARGE";
    case Status::kUnknownOp: return "UNKNOWN_OP";
    case Status::kNotAuthenticated: return "NOT_AUTHENTICATED";
    case Status::kAuthFailed: return "AUTH_FAILED";
    case Status::kAuthTimeout: return "AUTH_TIMEOUT";
    case Status::kSizeMismatch: return "SIZE_MISMATCH";
    case Status::kRankOutOfRange: return "RANK_OUT_OF_RANGE";
    case Status::kDuplicateRank: return "DUPLICATE_RANK";
  }
  return "UNKNOWN";
}

bool is_known_op(std::uint8_t op) {
  return (op >= 0x01 && op <= 0x06) || (op >= 0x10 && op <= 0x16);
}

bool is_known_status(std::uint8_t status) { return status <= 3 || (status >= 16 && status <= 25); }

bool is_request_op(Op op) {
  return op == Op::kGoodbye ||
         (static_cast<std::uint8_t>(op) >= 0x10 && static_cast<std::uint8_t>(op) <= 0x16);
}

void encode_header(const Header& header, std::uint8_t* out) {
  out[0] = kMagic0;
  out[1] = kMagic1;
  out[2] = header.version;
  out[3] = static_cast<std::uint8_t>(header.op);
  out[4] = static_cast<std::uint8_t>(header.status);
  out[5] = out[6] = out[7] = 0;
  put_le(out + 8, header.request_id, 4);
  put_le(out + 12, header.payload_bytes, 4);
}

std::optional<std::string> http_request_start(std::span<const std::uint8_t, kHeaderBytes> b) {
  const std::string text(b.begin(), b.end());
  bool method = false;
  for (const char* m : {"GET /", "PUT /", "POST /", "DELETE /", "HEAD /"}) {
    if (text.rfind(m, 0) == 0) method = true;
  }
  if (!method) return std::nullopt;
  // The request line up to its end or the first byte that is not printable.
  std::size_t n = 0;
  while (n < text.size() && text[n] >= 0x20 && text[n] < 0x7f) ++n;
  return text.substr(0, n);
}

Status decode_header(std::span<const std::uint8_t, kHeaderBytes> b, std::size_t max_frame_bytes,
                     Header* out, std::string* why) {
  out->request_id = static_cast<std::uint32_t>(get_le(b.data() + 8, 4));
  out->payload_bytes = static_cast<std::uint32_t>(get_le(b.data() + 12, 4));
  out->version = b[2];
  if (b[0] != kMagic0 || b[1] != kMagic1) {
    // Only a header that is not hora's is looked at as HTTP: no cost on every frame.
    if (const auto http = http_request_start(b)) {
      *why = fmt::format("an HTTP request (\"{}...\"), not a hora rendezvous frame", *http);
      return Status::kBadFrame;
    }
    *why = fmt::format(
        "not a hora rendezvous frame (first bytes 0x{:02x} 0x{:02x}, expected "
        "\"HR\")",
        b[0], b[1]);
    return Status::kBadFrame;
  }
  if (b[2] != kVersion) {
    *why = fmt::format(
        "protocol version {} is not supported (this side speaks version {}); "
        "use the same hora build for horarun and the ranks",
        b[2], kVersion);
    return Status::kBadVersion;
  }
  if (b[5] != 0 || b[6] != 0 || b[7] != 0) {
    *why = "reserved header bytes 5..7 are not zero";
    return Status::kBadFrame;
  }
  if (!is_known_op(b[3])) {
    *why = fmt::format("unknown op 0x{:02x}", b[3]);
    return Status::kUnknownOp;
  }
  out->op = static_cast<Op>(b[3]);
  if (!is_known_status(b[4])) {
    *why = fmt::format("unknown status 0x{:02x} in a {} frame", b[4], op_name(out->op));
    return Status::kBadFrame;
  }
  out->status = static_cast<Status>(b[4]);
  if (std::uint64_t{out->payload_bytes} + kHeaderBytes > max_frame_bytes) {
    *why = fmt::format("{} frame of {} bytes exceeds the limit of {} bytes", op_name(out->op),
                       std::uint64_t{out->payload_bytes} + kHeaderBytes, max_frame_bytes);
    return Status::kTooLarge;
  }
  return Status::kOk;
}

std::uint32_t length_u32(std::size_t n, const char* what) {
  if (n > std::numeric_limits<std::uint32_t>::max()) {
    throw std::length_error(
        fmt::format("{} of {} bytes does not fit a 32-bit length field", what, n));
  }
  return static_cast<std::uint32_t>(n);
}

Bytes encode_frame(Op op, Status status, std::uint32_t request_id,
                   std::span<const std::uint8_t> payload) {
  const std::uint32_t payload_bytes = length_u32(payload.size(), "a frame payload");
  Bytes frame(kHeaderBytes + payload.size());
  Header h;
  h.op = op;
  h.status = status;
  h.request_id = request_id;
  h.payload_bytes = payload_bytes;
  encode_header(h, frame.data());
  if (!payload.empty()) std::memcpy(frame.data() + kHeaderBytes, payload.data(), payload.size());
  return frame;
}

void frame_in_place(Op op, Status status, std::uint32_t request_id, Bytes& frame,
                    std::optional<std::size_t> payload_bytes) {
  if (frame.size() < kHeaderBytes) {
    throw std::logic_error("frame_in_place: no room for the header");
  }
  Header h;
  h.op = op;
  h.status = status;
  h.request_id = request_id;
  h.payload_bytes =
      length_u32(payload_bytes.value_or(frame.size() - kHeaderBytes), "a frame payload");
  encode_header(h, frame.data());
}

Writer& Writer::u8(std::uint8_t v) {
  buf_.push_back(v);
  return *this;
}
Writer& Writer::u32(std::uint32_t v) {
  std::size_t at = buf_.size();
  buf_.resize(at + 4);
  put_le(buf_.data() + at, v, 4);
  return *this;
}
Writer& Writer::i32(std::int32_t v) { return u32(static_cast<std::uint32_t>(v)); }
Writer& Writer::u64(std::uint64_t v) {
  std::size_t at = buf_.size();
  buf_.resize(at + 8);
  put_le(buf_.data() + at, v, 8);
  return *this;
}
Writer& Writer::i64(std::int64_t v) { return u64(static_cast<std::uint64_t>(v)); }
Writer& Writer::raw(std::span<const std::uint8_t> v) {
  buf_.insert(buf_.end(), v.begin(), v.end());
  return *this;
}
Writer& Writer::bytes(std::span<const std::uint8_t> v) {
  u32(length_u32(v.size(), "a bytes field"));
  return raw(v);
}
Writer& Writer::str(std::string_view v) {
  return bytes({reinterpret_cast<const std::uint8_t*>(v.data()), v.size()});
}

std::span<const std::uint8_t> Reader::take(std::size_t n, const char* what) {
  if (n > rest_.size()) {
    throw DecodeError(
        fmt::format("payload truncated: {} needs {} bytes, {} left", what, n, rest_.size()));
  }
  auto out = rest_.first(n);
  rest_ = rest_.subspan(n);
  return out;
}
std::uint8_t Reader::u8() { return take(1, "uint8")[0]; }
std::uint32_t Reader::u32() {
  return static_cast<std::uint32_t>(get_le(take(4, "uint32").data(), 4));
}
std::int32_t Reader::i32() { return static_cast<std::int32_t>(u32()); }
std::uint64_t Reader::u64() { return get_le(take(8, "uint64").data(), 8); }
std::int64_t Reader::i64() { return static_cast<std::int64_t>(u64()); }
void Reader::raw(std::span<std::uint8_t> out) {
  auto in = take(out.size(), "fixed-size field");
  std::memcpy(out.data(), in.data(), in.size());
}
Bytes Reader::bytes() {
  std::uint32_t n = u32();
  auto in = take(n, "length-prefixed field");
  return Bytes(in.begin(), in.end());
}
std::string Reader::str() {
  std::uint32_t n = u32();
  auto in = take(n, "string");
  return std::string(reinterpret_cast<const char*>(in.data()), in.size());
}
void Reader::expect_end() const {
  if (!rest_.empty()) {
    throw DecodeError(fmt::format("{} unexpected bytes after the last field", rest_.size()));
  }
}

Bytes encode(const Hello& m) { return Writer().raw(m.nonce).take(); }
Bytes encode(const AuthRequest& m) { return Writer().i32(m.rank).i32(m.size).raw(m.proof).take(); }
Bytes encode(const Reset& m) {
  return Writer()
      .u32(m.round)
      .u8(m.interrupt ? 1 : 0)
      .i32(m.rank)
      .i32(m.size)
      .i32(m.local_rank)
      .i32(m.local_size)
      .i32(m.cross_rank)
      .i32(m.cross_size)
      .i32(m.host_index)
      .str(m.rendezvous)
      .take();
}
Bytes encode(const SetRequest& m) { return Writer().str(m.key).bytes(m.value).take(); }
Bytes encode(const WaitRequest& m) { return Writer().str(m.key).u64(m.timeout_ms).take(); }
Bytes encode(const AddRequest& m) { return Writer().str(m.key).i64(m.delta).take(); }
Bytes encode(const DelRequest& m) { return Writer().str(m.key).take(); }
Bytes encode(const ExchangeRequest& m) { return encode_exchange(m.name, m.timeout_ms, m.slices); }

Bytes encode_exchange(std::string_view name, std::uint64_t timeout_ms,
                      const std::vector<Bytes>& slices) {
  Writer w;
  w.str(name).u64(timeout_ms).u32(static_cast<std::uint32_t>(slices.size()));
  for (const auto& s : slices) w.bytes(s);
  return w.take();
}

Hello decode_hello(std::span<const std::uint8_t> payload) {
  Reader r(payload);
  Hello m;
  r.raw(m.nonce);
  r.expect_end();
  return m;
}
AuthRequest decode_auth(std::span<const std::uint8_t> payload) {
  Reader r(payload);
  AuthRequest m;
  m.rank = r.i32();
  m.size = r.i32();
  r.raw(m.proof);
  r.expect_end();
  return m;
}
Reset decode_reset(std::span<const std::uint8_t> payload) {
  Reader r(payload);
  Reset m;
  m.round = r.u32();
  const std::uint8_t interrupt = r.u8();
  if (interrupt > 1)
    throw DecodeError(fmt::format("RESET: interrupt is {}, not 0 or 1", interrupt));
  m.interrupt = interrupt == 1;
  m.rank = r.i32();
  m.size = r.i32();
  m.local_rank = r.i32();
  m.local_size = r.i32();
  m.cross_rank = r.i32();
  m.cross_size = r.i32();
  m.host_index = r.i32();
  m.rendezvous = r.str();
  r.expect_end();
  const bool ok = m.size > 0 && m.rank >= 0 && m.rank < m.size && m.local_size > 0 &&
                  m.local_size <= m.size && m.local_rank >= 0 && m.local_rank < m.local_size &&
                  m.cross_size > 0 && m.cross_size <= m.size && m.cross_rank >= 0 &&
                  m.cross_rank < m.cross_size && m.host_index >= 0 && !m.rendezvous.empty();
  if (!ok) {
    throw DecodeError(fmt::format(
        "RESET: inconsistent numbers (rank {} of {}, local {} of {}, cross {} of {}, host {}, "
        "rendezvous '{}')",
        m.rank, m.size, m.local_rank, m.local_size, m.cross_rank, m.cross_size, m.host_index,
        m.rendezvous));
  }
  return m;
}
SetRequest decode_set(std::span<const std::uint8_t> payload) {
  Reader r(payload);
  SetRequest m;
  m.key = r.str();
  m.value = r.bytes();
  r.expect_end();
  return m;
}
WaitRequest decode_wait(std::span<const std::uint8_t> payload) {
  Reader r(payload);
  WaitRequest m;
  m.key = r.str();
  m.timeout_ms = r.u64();
  r.expect_end();
  return m;
}
AddRequest decode_add(std::span<const std::uint8_t> payload) {
  Reader r(payload);
  AddRequest m;
  m.key = r.str();
  m.delta = r.i64();
  r.expect_end();
  return m;
}
DelRequest decode_del(std::span<const std::uint8_t> payload) {
  Reader r(payload);
  DelRequest m;
  m.key = r.str();
  r.expect_end();
  return m;
}

namespace {
std::uint32_t read_slice_count(Reader& r) {
  std::uint32_t n = r.u32();
  // Each slice has at least its 4-byte length: a count the payload cannot hold is rejected
  // before anything is allocated for it.
  if (std::uint64_t{n} * 4 > r.remaining()) {
    throw DecodeError(
        fmt::format("slice count {} cannot fit in the {} bytes that follow", n, r.remaining()));
  }
  return n;
}

std::vector<Bytes> read_slices(Reader& r) {
  std::uint32_t n = read_slice_count(r);
  std::vector<Bytes> slices;
  slices.reserve(n);
  for (std::uint32_t i = 0; i < n; ++i) slices.push_back(r.bytes());
  return slices;
}
}  // namespace

std::span<const std::uint8_t> Reader::fixed(std::size_t n) { return take(n, "fixed-size field"); }

std::span<const std::uint8_t> Reader::view() {
  std::uint32_t n = u32();
  return take(n, "length-prefixed field");
}

ExchangeView decode_exchange_view(std::span<const std::uint8_t> payload) {
  Reader r(payload);
  ExchangeView m;
  m.name = r.str();
  m.timeout_ms = r.u64();
  std::uint32_t n = read_slice_count(r);
  m.slices.reserve(n);
  for (std::uint32_t i = 0; i < n; ++i) m.slices.push_back(r.view());
  r.expect_end();
  return m;
}

Bytes encode_gather(std::string_view name, std::uint64_t timeout_ms,
                    std::span<const std::uint8_t> record, std::uint32_t width, std::uint32_t count,
                    std::span<const std::uint8_t> slices) {
  if (slices.size() != std::size_t{width} * count) {
    throw std::invalid_argument(
        fmt::format("encode_gather: {} slice bytes for {} slices of {} bytes", slices.size(), count,
                    width));
  }
  Writer w;
  w.reserve(4 + name.size() + 8 + 4 + record.size() + 8 + slices.size());
  w.str(name).u64(timeout_ms).bytes(record).u32(width).u32(count).raw(slices);
  return w.take();
}

namespace {
// count x width bytes must be exactly what is left; checked before anything is allocated.
std::span<const std::uint8_t> read_fixed_slices(Reader& r, std::uint32_t width,
                                                std::uint32_t count) {
  const std::uint64_t bytes = std::uint64_t{width} * count;
  if (bytes != r.remaining()) {
    throw DecodeError(fmt::format("{} slices of {} bytes need {} bytes, but {} follow", count,
                                  width, bytes, r.remaining()));
  }
  return r.fixed(static_cast<std::size_t>(bytes));
}
}  // namespace

GatherView decode_gather_view(std::span<const std::uint8_t> payload) {
  Reader r(payload);
  GatherView m;
  m.name = r.str();
  m.timeout_ms = r.u64();
  m.record = r.view();
  m.width = r.u32();
  m.count = r.u32();
  m.slices = read_fixed_slices(r, m.width, m.count);
  r.expect_end();
  return m;
}

GatherReplyView decode_gather_reply(std::span<const std::uint8_t> payload) {
  Reader r(payload);
  GatherReplyView m;
  read_gather_records(r, &m);
  m.width = r.u32();
  m.column = read_fixed_slices(r, m.width, static_cast<std::uint32_t>(m.records.size()));
  r.expect_end();
  return m;
}

ExchangeRequest decode_exchange(std::span<const std::uint8_t> payload) {
  Reader r(payload);
  ExchangeRequest m;
  m.name = r.str();
  m.timeout_ms = r.u64();
  m.slices = read_slices(r);
  r.expect_end();
  return m;
}

Bytes encode_bytes(std::span<const std::uint8_t> value) { return Writer().bytes(value).take(); }
Bytes decode_bytes(std::span<const std::uint8_t> payload) {
  Reader r(payload);
  Bytes v = r.bytes();
  r.expect_end();
  return v;
}
Bytes encode_i64(std::int64_t v) { return encode_one<std::int64_t>(v, &Writer::i64); }
std::int64_t decode_i64(std::span<const std::uint8_t> payload) {
  Reader r(payload);
  std::int64_t v = r.i64();
  r.expect_end();
  return v;
}
Bytes encode_u8(std::uint8_t v) { return encode_one<std::uint8_t>(v, &Writer::u8); }
std::uint8_t decode_u8(std::span<const std::uint8_t> payload) {
  Reader r(payload);
  std::uint8_t v = r.u8();
  r.expect_end();
  return v;
}
Bytes encode_slices(const std::vector<Bytes>& slices) {
  Writer w;
  w.u32(static_cast<std::uint32_t>(slices.size()));
  for (const auto& s : slices) w.bytes(s);
  return w.take();
}
std::vector<Bytes> decode_slices(std::span<const std::uint8_t> payload) {
  Reader r(payload);
  auto v = read_slices(r);
  r.expect_end();
  return v;
}
Bytes encode_message(std::string_view text) { return Writer().str(text).take(); }
std::string decode_message(std::span<const std::uint8_t> payload) {
  Reader r(payload);
  std::string v = r.str();
  r.expect_end();
  return v;
}

std::size_t slices_wire_bytes(const std::vector<Bytes>& slices) {
  std::size_t n = 4;
  for (const auto& s : slices) n += 4 + s.size();
  return n;
}

}  // namespace hora::rdv::wire
