#include "runtime/gloo/mesh_record.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

#include <fmt/format.h>
#include <gloo/transport/tcp/address.h>
#include <hora/error.h>

namespace hora::detail::gloo {
namespace {

class Writer {
 public:
  void u8(std::uint8_t v) { out_.push_back(v); }
  void uint(std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out_.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  void raw(const void* data, std::size_t n) {
    const auto* p = static_cast<const std::uint8_t*>(data);
    out_.insert(out_.end(), p, p + n);
  }
  std::vector<std::uint8_t> take() { return std::move(out_); }

 private:
  std::vector<std::uint8_t> out_;
};

class Reader {
 public:
  Reader(std::span<const std::uint8_t> in, int from) : in_(in), from_(from) {}
  std::uint64_t uint(int bytes, const char* field) {
    need(static_cast<std::size_t>(bytes), field);
    std::uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; --i) v = v << 8 | in_[at_ + static_cast<std::size_t>(i)];
    at_ += static_cast<std::size_t>(bytes);
    return v;
  }
  int count(const char* field) {
    const std::uint64_t v = uint(4, field);
    if (v > 0x7FFFFFFF) fail(fmt::format("{} is {}", field, v));
    return static_cast<int>(v);
  }
  void raw(void* out, std::size_t n, const char* field) {
    need(n, field);
    std::memcpy(out, in_.data() + at_, n);
    at_ += n;
  }
  void expect_end() {
    if (at_ != in_.size()) fail(fmt::format("{} bytes after the last field", in_.size() - at_));
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw Error(
        fmt::format("malformed mesh record from rank {} ({} bytes): {}; is every rank "
                    "running the same version of libhora?",
                    from_, in_.size(), why));
  }

 private:
  void need(std::size_t n, const char* field) {
    if (at_ + n > in_.size()) {
      fail(fmt::format("truncated in {} (needs {} bytes, {} left)", field, n, in_.size() - at_));
    }
  }
  std::span<const std::uint8_t> in_;
  int from_;
  std::size_t at_ = 0;
};

}  // namespace

bool operator==(const PairAddressBase& a, const PairAddressBase& b) {
  if (a.seq != b.seq || a.sockaddr.ss_family != b.sockaddr.ss_family) return false;
  if (a.sockaddr.ss_family == AF_INET) {
    const auto& x = reinterpret_cast<const sockaddr_in&>(a.sockaddr);
    const auto& y = reinterpret_cast<const sockaddr_in&>(b.sockaddr);
    return x.sin_addr.s_addr == y.sin_addr.s_addr;
  }
  if (a.sockaddr.ss_family == AF_INET6) {
    const auto& x = reinterpret_cast<const sockaddr_in6&>(a.sockaddr);
    const auto& y = reinterpret_cast<const sockaddr_in6&>(b.sockaddr);
    return std::memcmp(&x.sin6_addr, &y.sin6_addr, sizeof x.sin6_addr) == 0 &&
           x.sin6_scope_id == y.sin6_scope_id;
  }
  return false;
}

std::uint16_t split_pair_address(const std::vector<char>& gloo_bytes, PairAddressBase* base) {
  const ::gloo::transport::tcp::Address address(gloo_bytes);
  const sockaddr_storage& ss = address.getSockaddr();
  PairAddressBase out;
  out.seq = static_cast<std::int64_t>(address.getSeq());
  std::uint16_t port = 0;
  if (ss.ss_family == AF_INET) {
    sockaddr_in in{};
    std::memcpy(&in, &ss, sizeof in);
    port = ntohs(in.sin_port);
    sockaddr_in clean{};
    clean.sin_family = AF_INET;
    clean.sin_addr = in.sin_addr;
    std::memcpy(&out.sockaddr, &clean, sizeof clean);
  } else if (ss.ss_family == AF_INET6) {
    sockaddr_in6 in6{};
    std::memcpy(&in6, &ss, sizeof in6);
    port = ntohs(in6.sin6_port);
    sockaddr_in6 clean{};
    clean.sin6_family = AF_INET6;
    clean.sin6_addr = in6.sin6_addr;
    clean.sin6_scope_id = in6.sin6_scope_id;
    std::memcpy(&out.sockaddr, &clean, sizeof clean);
  } else {
    throw Error(
        fmt::format("a Gloo pair address of family {} (not IPv4 or IPv6): hora's mesh "
                    "exchange only handles TCP pairs",
                    ss.ss_family));
  }
  *base = out;
  return port;
}

std::vector<char> join_pair_address(const PairAddressBase& base, std::uint16_t port) {
  sockaddr_storage ss = base.sockaddr;
  if (ss.ss_family == AF_INET) {
    reinterpret_cast<sockaddr_in&>(ss).sin_port = htons(port);
  } else {
    reinterpret_cast<sockaddr_in6&>(ss).sin6_port = htons(port);
  }
  return ::gloo::transport::tcp::Address(ss, static_cast<::gloo::transport::tcp::sequence_number_t>(
                                                 base.seq))
      .bytes();
}

std::vector<std::uint8_t> encode_record(const RankRecord& r) {
  Writer w;
  w.u8(kRecordVersion);
  for (int v : {r.host_index, r.local_rank, r.local_size, r.cross_rank, r.cross_size}) {
    w.uint(static_cast<std::uint32_t>(v), 4);
  }
  if (r.base.sockaddr.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(r.base.sockaddr);
    w.u8(4);
    w.raw(&in.sin_addr, 4);
  } else if (r.base.sockaddr.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(r.base.sockaddr);
    w.u8(6);
    w.raw(&in6.sin6_addr, 16);
    w.uint(in6.sin6_scope_id, 4);
  } else {
    throw Error(fmt::format("encode_record: address family {} is not IPv4 or IPv6",
                            r.base.sockaddr.ss_family));
  }
  w.uint(static_cast<std::uint64_t>(r.base.seq), 8);
  const std::size_t name = std::min(r.hostname.size(), kMaxHostnameBytes);
  w.uint(name, 2);
  w.raw(r.hostname.data(), name);
  return w.take();
}

RankRecord decode_record(std::span<const std::uint8_t> bytes, int from) {
  Reader in(bytes, from);
  const auto version = in.uint(1, "version");
  if (version != kRecordVersion) {
    in.fail(fmt::format("record version {}, this rank speaks {}", version, kRecordVersion));
  }
  RankRecord r;
  r.host_index = in.count("host index");
  r.local_rank = in.count("local rank");
  r.local_size = in.count("local size");
  r.cross_rank = in.count("cross rank");
  r.cross_size = in.count("cross size");
  if (r.local_size < 1 || r.cross_size < 1) {
    in.fail(fmt::format("local size {} and cross size {} must be at least 1", r.local_size,
                        r.cross_size));
  }
  const auto family = in.uint(1, "address family");
  if (family == 4) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    in.raw(&a.sin_addr, 4, "IPv4 address");
    std::memcpy(&r.base.sockaddr, &a, sizeof a);
  } else if (family == 6) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    in.raw(&a.sin6_addr, 16, "IPv6 address");
    a.sin6_scope_id = static_cast<std::uint32_t>(in.uint(4, "IPv6 scope id"));
    std::memcpy(&r.base.sockaddr, &a, sizeof a);
  } else {
    in.fail(fmt::format("address family {} (expected 4 or 6)", family));
  }
  r.base.seq = static_cast<std::int64_t>(in.uint(8, "sequence number"));
  const auto name = in.uint(2, "host name length");
  if (name > kMaxHostnameBytes) {
    in.fail(fmt::format("a host name of {} bytes (at most {})", name, kMaxHostnameBytes));
  }
  r.hostname.resize(name);
  in.raw(r.hostname.data(), name, "host name");
  in.expect_end();
  return r;
}

std::string format_pair_endpoint(const PairAddressBase& base, std::uint16_t port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (base.sockaddr.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(base.sockaddr);
    inet_ntop(AF_INET, &in.sin_addr, text, sizeof text);
    return fmt::format("{}:{}", text, port);
  }
  if (base.sockaddr.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(base.sockaddr);
    inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof text);
    return fmt::format("[{}]:{}", text, port);
  }
  return "?";
}

}  // namespace hora::detail::gloo
