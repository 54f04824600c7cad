#include "runtime/engine/negotiation_message.h"

#include <hora/error.h>

namespace hora::detail::engine {
namespace {

class Writer {
 public:
  explicit Writer(std::vector<std::uint8_t>& out) : out_(out) {}
  void u8(std::uint8_t v) { out_.push_back(v); }
  void u16(std::uint16_t v) { le(v, 2); }
  void u32(std::uint32_t v) { le(v, 4); }
  void u64(std::uint64_t v) { le(v, 8); }
  void str(const std::string& s) {
    u16(static_cast<std::uint16_t>(s.size()));
    out_.insert(out_.end(), s.begin(), s.end());
  }

 private:
  void le(std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out_.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  std::vector<std::uint8_t>& out_;
};

class Reader {
 public:
  Reader(std::span<const std::uint8_t> in, int from_rank) : in_(in), rank_(from_rank) {}
  std::uint8_t u8() { return static_cast<std::uint8_t>(le(1)); }
  std::uint16_t u16() { return static_cast<std::uint16_t>(le(2)); }
  std::uint32_t u32() { return static_cast<std::uint32_t>(le(4)); }
  std::uint64_t u64() { return le(8); }
  std::string str() {
    std::size_t n = u16();
    need(n);
    std::string s(reinterpret_cast<const char*>(in_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  void finish() const {
    if (pos_ != in_.size()) fail("trailing bytes after the message");
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw Error("hora engine: malformed negotiation message from rank " + std::to_string(rank_) +
                " (" + why + " at byte " + std::to_string(pos_) + " of " +
                std::to_string(in_.size()) + "); are all ranks running the same build of libhora?");
  }

 private:
  void need(std::size_t n) const {
    if (in_.size() - pos_ < n) fail("truncated");
  }
  std::uint64_t le(int bytes) {
    need(static_cast<std::size_t>(bytes));
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i)
      v |= std::uint64_t{in_[pos_ + static_cast<std::size_t>(i)]} << (8 * i);
    pos_ += static_cast<std::size_t>(bytes);
    return v;
  }
  std::span<const std::uint8_t> in_;
  std::size_t pos_ = 0;
  int rank_;
};

}  // namespace

std::vector<std::uint8_t> NegotiationMessage::encode() const {
  std::vector<std::uint8_t> out;
  Writer w(out);
  w.u8('H');
  w.u8('E');
  w.u8(kVersion);
  w.u32(static_cast<std::uint32_t>(requests.size()));
  for (const Announcement& a : requests) {
    const Request& r = a.request;
    w.str(r.name);
    w.u8(static_cast<std::uint8_t>(r.type));
    w.u8(static_cast<std::uint8_t>(r.dtype));
    w.u8(static_cast<std::uint8_t>(r.op));
    w.u64(r.count);
    w.u32(static_cast<std::uint32_t>(r.root));
    w.u32(static_cast<std::uint32_t>(r.device));
    w.u8(static_cast<std::uint8_t>(r.shape.size()));
    for (std::int64_t d : r.shape) w.u64(static_cast<std::uint64_t>(d));
    w.u32(a.waited_ms);
  }
  w.u32(static_cast<std::uint32_t>(abandon.size()));
  for (const std::string& name : abandon) w.str(name);
  return out;
}

NegotiationMessage NegotiationMessage::decode(std::span<const std::uint8_t> bytes, int from_rank) {
  Reader r(bytes, from_rank);
  if (r.u8() != 'H' || r.u8() != 'E') r.fail("bad magic");
  if (std::uint8_t v = r.u8(); v != kVersion) {
    r.fail("version " + std::to_string(v) + ", expected " + std::to_string(kVersion));
  }
  NegotiationMessage m;
  std::uint32_t n = r.u32();
  for (std::uint32_t i = 0; i < n; ++i) {
    Announcement a;
    a.request.name = r.str();
    std::uint8_t type = r.u8();
    std::uint8_t dtype = r.u8();
    std::uint8_t op = r.u8();
    if (type >= kOpTypeCount) r.fail("unknown op type " + std::to_string(type));
    if (dtype > static_cast<std::uint8_t>(DataType::kInt16)) {
      r.fail("unknown data type " + std::to_string(dtype));
    }
    if (op > static_cast<std::uint8_t>(ReduceOp::kProduct)) {
      r.fail("unknown reduce op " + std::to_string(op));
    }
    a.request.type = static_cast<OpType>(type);
    a.request.dtype = static_cast<DataType>(dtype);
    a.request.op = static_cast<ReduceOp>(op);
    a.request.count = r.u64();
    a.request.root = static_cast<std::int32_t>(r.u32());
    a.request.device = static_cast<std::int32_t>(r.u32());
    const std::uint8_t ndims = r.u8();
    for (std::uint8_t d = 0; d < ndims; ++d) {
      a.request.shape.push_back(static_cast<std::int64_t>(r.u64()));
    }
    a.waited_ms = r.u32();
    m.requests.push_back(std::move(a));
  }
  std::uint32_t k = r.u32();
  for (std::uint32_t i = 0; i < k; ++i) m.abandon.push_back(r.str());
  r.finish();
  return m;
}

}  // namespace hora::detail::engine
