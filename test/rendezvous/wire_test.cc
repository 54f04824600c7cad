// The wire format: header and payload round trips, and every way a frame can be refused.
#include <sys/mman.h>

#include <catch2/catch.hpp>

#include "rendezvous/format.h"
#include "rendezvous/wire.h"

using namespace hora::rdv;
using wire::Bytes;
using wire::Op;
using wire::Status;

namespace {

std::array<std::uint8_t, wire::kHeaderBytes> header_bytes(const wire::Header& h) {
  std::array<std::uint8_t, wire::kHeaderBytes> b{};
  wire::encode_header(h, b.data());
  return b;
}

Status decode(const std::array<std::uint8_t, wire::kHeaderBytes>& b, std::size_t limit,
              wire::Header* out, std::string* why) {
  return wire::decode_header(b, limit, out, why);
}

Bytes bytes_of(const std::string& s) { return Bytes(s.begin(), s.end()); }

}  // namespace

TEST_CASE("header layout is the documented one", "[wire]") {
  wire::Header h;
  h.op = Op::kExchange;
  h.status = Status::kTimeout;
  h.request_id = 0x04030201;
  h.payload_bytes = 0x0a0b0c0d;
  auto b = header_bytes(h);
  std::array<std::uint8_t, 16> expected{0x48, 0x52, 4,    0x15, 1,    0,    0,    0,
                                        0x01, 0x02, 0x03, 0x04, 0x0d, 0x0c, 0x0b, 0x0a};
  CHECK(b == expected);
}

TEST_CASE("header round trip", "[wire]") {
  for (auto op : {Op::kHello, Op::kAuth, Op::kReject, Op::kAbort, Op::kGoodbye, Op::kSet, Op::kGet,
                  Op::kAdd, Op::kDel, Op::kBarrier, Op::kExchange}) {
    for (auto st : {Status::kOk, Status::kTimeout, Status::kInvalid, Status::kAborted,
                    Status::kBadFrame, Status::kDuplicateRank}) {
      wire::Header h;
      h.op = op;
      h.status = st;
      h.request_id = 0xdeadbeef;
      h.payload_bytes = 1000;
      wire::Header out;
      std::string why;
      REQUIRE(decode(header_bytes(h), 1016, &out, &why) == Status::kOk);
      CHECK(out.op == op);
      CHECK(out.status == st);
      CHECK(out.request_id == 0xdeadbeef);
      CHECK(out.payload_bytes == 1000);
      CHECK(out.version == wire::kVersion);
    }
  }
}

TEST_CASE("malformed headers are refused with the matching status", "[wire]") {
  wire::Header h;
  h.op = Op::kSet;
  h.request_id = 9;
  h.payload_bytes = 100;
  auto good = header_bytes(h);
  wire::Header out;
  std::string why;

  SECTION("bad magic") {
    auto b = good;
    b[0] = 'G';
    b[1] = 'E';
    CHECK(decode(b, 1 << 20, &out, &why) == Status::kBadFrame);
    CHECK_THAT(why, Catch::Contains("not a hora rendezvous frame"));
    CHECK_FALSE(wire::http_request_start(b).has_value());
  }
  SECTION("an HTTP request") {
    const std::string text = "DELETE /local_h\x01";  // stops at the first unprintable byte
    std::array<std::uint8_t, wire::kHeaderBytes> b{};
    std::copy(text.begin(), text.end(), b.begin());
    CHECK(decode(b, 1 << 20, &out, &why) == Status::kBadFrame);
    CHECK_THAT(why, Catch::Contains("an HTTP request (\"DELETE /local_h...\")"));
    CHECK(wire::http_request_start(b) == "DELETE /local_h");
  }
  SECTION("bad version") {
    auto b = good;
    b[2] = 2;  // a hora whose GATHER answers carried zlib streams
    CHECK(decode(b, 1 << 20, &out, &why) == Status::kBadVersion);
    CHECK_THAT(why, Catch::Contains("version 2"));
  }
  SECTION("reserved bytes set") {
    auto b = good;
    b[6] = 1;
    CHECK(decode(b, 1 << 20, &out, &why) == Status::kBadFrame);
    CHECK_THAT(why, Catch::Contains("reserved"));
  }
  SECTION("unknown op") {
    auto b = good;
    b[3] = 0x7f;
    CHECK(decode(b, 1 << 20, &out, &why) == Status::kUnknownOp);
    CHECK_THAT(why, Catch::Contains("0x7f"));
  }
  SECTION("unknown status") {
    auto b = good;
    b[4] = 200;
    CHECK(decode(b, 1 << 20, &out, &why) == Status::kBadFrame);
  }
  SECTION("frame over the limit; exactly at the limit is fine") {
    CHECK(decode(good, 115, &out, &why) == Status::kTooLarge);
    CHECK_THAT(why, Catch::Contains("116 bytes exceeds the limit of 115"));
    CHECK(decode(good, 116, &out, &why) == Status::kOk);
  }
  SECTION("a 4 GiB length does not overflow the check") {
    auto b = good;
    b[12] = b[13] = b[14] = b[15] = 0xff;
    CHECK(decode(b, std::size_t{1} << 40, &out, &why) == Status::kOk);
    CHECK(decode(b, std::size_t{0xffffffff}, &out, &why) == Status::kTooLarge);
  }
  SECTION("the request id is decoded even from a refused header") {
    auto b = good;
    b[2] = 9;
    decode(b, 1 << 20, &out, &why);
    CHECK(out.request_id == 9);
  }
}

TEST_CASE("encode_frame puts the payload after the header", "[wire]") {
  Bytes payload{1, 2, 3};
  auto f = wire::encode_frame(Op::kGet, Status::kOk, 42, payload);
  REQUIRE(f.size() == wire::kHeaderBytes + 3);
  wire::Header h;
  std::string why;
  std::array<std::uint8_t, wire::kHeaderBytes> hb{};
  std::copy_n(f.begin(), hb.size(), hb.begin());
  REQUIRE(decode(hb, 1 << 20, &h, &why) == Status::kOk);
  CHECK(h.payload_bytes == 3);
  CHECK(h.request_id == 42);
  CHECK(Bytes(f.begin() + wire::kHeaderBytes, f.end()) == payload);
}

TEST_CASE("payload round trips", "[wire]") {
  SECTION("HELLO") {
    wire::Hello m;
    for (std::size_t i = 0; i < m.nonce.size(); ++i) m.nonce[i] = static_cast<std::uint8_t>(i * 7);
    auto enc = wire::encode(m);
    CHECK(enc.size() == wire::kNonceBytes);
    CHECK(wire::decode_hello(enc).nonce == m.nonce);
  }
  SECTION("AUTH") {
    wire::AuthRequest m{-3, 1024, {}};
    m.proof.fill(0xab);
    auto enc = wire::encode(m);
    CHECK(enc.size() == wire::kAuthPayloadBytes);
    auto d = wire::decode_auth(enc);
    CHECK(d.rank == -3);
    CHECK(d.size == 1024);
    CHECK(d.proof == m.proof);
  }
  SECTION("SET with binary value, empty key") {
    wire::SetRequest m{"", Bytes{0, 255, 0, 7}};
    auto d = wire::decode_set(wire::encode(m));
    CHECK(d.key.empty());
    CHECK(d.value == m.value);
  }
  SECTION("GET / BARRIER") {
    wire::WaitRequest m{"gloo/addr/3", 0x123456789abcULL};
    auto d = wire::decode_wait(wire::encode(m));
    CHECK(d.key == m.key);
    CHECK(d.timeout_ms == m.timeout_ms);
  }
  SECTION("ADD") {
    wire::AddRequest m{"count", std::numeric_limits<std::int64_t>::min()};
    auto d = wire::decode_add(wire::encode(m));
    CHECK(d.key == "count");
    CHECK(d.delta == m.delta);
  }
  SECTION("DEL") { CHECK(wire::decode_del(wire::encode(wire::DelRequest{"k"})).key == "k"); }
  SECTION("EXCHANGE") {
    wire::ExchangeRequest m{"mesh", 30000, {bytes_of("to 0"), Bytes{}, bytes_of("to rank 2")}};
    auto enc = wire::encode(m);
    auto d = wire::decode_exchange(enc);
    CHECK(d.name == "mesh");
    CHECK(d.timeout_ms == 30000);
    CHECK(d.slices == m.slices);
  }
  SECTION("responses") {
    CHECK(wire::decode_bytes(wire::encode_bytes(bytes_of("v"))) == bytes_of("v"));
    CHECK(wire::decode_i64(wire::encode_i64(-5)) == -5);
    CHECK(wire::decode_u8(wire::encode_u8(1)) == 1);
    std::vector<Bytes> col{bytes_of("a"), Bytes{}, bytes_of("ccc")};
    auto enc = wire::encode_slices(col);
    CHECK(enc.size() == wire::slices_wire_bytes(col));
    CHECK(wire::decode_slices(enc) == col);
    CHECK(wire::decode_message(wire::encode_message("timed out")) == "timed out");
  }
}

TEST_CASE("every truncation of a payload is refused, as are trailing bytes", "[wire]") {
  auto exchange = wire::encode(wire::ExchangeRequest{"x", 5, {bytes_of("ab"), bytes_of("c")}});
  auto set = wire::encode(wire::SetRequest{"key", bytes_of("value")});
  auto auth = wire::encode(wire::AuthRequest{1, 2, {}});
  for (std::size_t n = 0; n < exchange.size(); ++n) {
    CHECK_THROWS_AS(wire::decode_exchange(std::span(exchange).first(n)), wire::DecodeError);
  }
  for (std::size_t n = 0; n < set.size(); ++n) {
    CHECK_THROWS_AS(wire::decode_set(std::span(set).first(n)), wire::DecodeError);
  }
  for (std::size_t n = 0; n < auth.size(); ++n) {
    CHECK_THROWS_AS(wire::decode_auth(std::span(auth).first(n)), wire::DecodeError);
  }
  exchange.push_back(0);
  CHECK_THROWS_WITH(wire::decode_exchange(exchange), Catch::Contains("unexpected bytes"));
  set.push_back(0);
  CHECK_THROWS_AS(wire::decode_set(set), wire::DecodeError);
}

TEST_CASE("the copy-free exchange encoding and view decoding agree with the plain ones", "[wire]") {
  std::vector<Bytes> slices{bytes_of("first"), Bytes{}, Bytes(300, 9)};
  auto enc = wire::encode_exchange("n", 77, slices);
  CHECK(enc == wire::encode(wire::ExchangeRequest{"n", 77, slices}));
  auto v = wire::decode_exchange_view(enc);
  CHECK(v.name == "n");
  CHECK(v.timeout_ms == 77);
  REQUIRE(v.slices.size() == 3);
  for (std::size_t i = 0; i < slices.size(); ++i) {
    CHECK(Bytes(v.slices[i].begin(), v.slices[i].end()) == slices[i]);
  }
  // Views point into the payload itself.
  CHECK(v.slices[0].data() >= enc.data());
  CHECK(v.slices[2].data() + 300 == enc.data() + enc.size());
  for (std::size_t n = 0; n < enc.size(); ++n) {
    CHECK_THROWS_AS(wire::decode_exchange_view(std::span(enc).first(n)), wire::DecodeError);
  }
}

TEST_CASE("a slice count larger than the payload can hold is refused up front", "[wire]") {
  auto p = wire::Writer().str("x").u64(1).u32(0xffffffffu).take();
  CHECK_THROWS_WITH(wire::decode_exchange(p), Catch::Contains("cannot fit"));
  CHECK_THROWS_WITH(wire::decode_exchange_view(p), Catch::Contains("cannot fit"));
  auto col = wire::Writer().u32(1u << 30).take();
  CHECK_THROWS_AS(wire::decode_slices(col), wire::DecodeError);
}

TEST_CASE("gather request and answer round-trip as views", "[wire]") {
  const wire::Bytes record = bytes_of("record");
  const wire::Bytes slices = bytes_of("aabbcc");
  auto p = wire::encode_gather("mesh", 1234, record, 2, 3, slices);
  auto m = wire::decode_gather_view(p);
  CHECK(m.name == "mesh");
  CHECK(m.timeout_ms == 1234);
  CHECK(wire::Bytes(m.record.begin(), m.record.end()) == record);
  CHECK(m.width == 2);
  CHECK(m.count == 3);
  CHECK(wire::Bytes(m.slices.begin(), m.slices.end()) == slices);
  // The views point into the payload: no copy.
  CHECK(m.slices.data() >= p.data());
  CHECK(m.slices.data() + m.slices.size() == p.data() + p.size());

  const wire::Bytes r0 = bytes_of("r0"), r1;
  const std::vector<std::span<const std::uint8_t>> records{r0, r1};
  auto answer = wire::encode_gather_records(records);
  wire::Writer column;
  column.u32(3).raw(bytes_of("xyzXYZ"));
  const wire::Bytes tail = column.take();
  answer.insert(answer.end(), tail.begin(), tail.end());
  auto v = wire::decode_gather_reply(answer);
  REQUIRE(v.records.size() == 2);
  CHECK(wire::Bytes(v.records[0].begin(), v.records[0].end()) == bytes_of("r0"));
  CHECK(v.records[1].empty());
  CHECK(v.width == 3);
  CHECK(wire::Bytes(v.column.begin(), v.column.end()) == bytes_of("xyzXYZ"));
}

TEST_CASE("gather slices that do not fill count x width exactly are refused", "[wire]") {
  auto short_by_one =
      wire::Writer().str("g").u64(1).bytes({}).u32(2).u32(3).raw(bytes_of("12345")).take();
  CHECK_THROWS_WITH(wire::decode_gather_view(short_by_one),
                    Catch::Contains("3 slices of 2 bytes need 6 bytes, but 5 follow"));
  auto one_more =
      wire::Writer().str("g").u64(1).bytes({}).u32(2).u32(3).raw(bytes_of("1234567")).take();
  CHECK_THROWS_AS(wire::decode_gather_view(one_more), wire::DecodeError);
  // A huge count x width is refused without allocating it.
  auto huge = wire::Writer().str("g").u64(1).bytes({}).u32(0xFFFFFFFF).u32(0xFFFFFFFF).take();
  CHECK_THROWS_AS(wire::decode_gather_view(huge), wire::DecodeError);
  const wire::Bytes r = bytes_of("r");
  const std::vector<std::span<const std::uint8_t>> one{r};
  auto answer = wire::encode_gather_records(one);
  const wire::Bytes short_column = wire::Writer().u32(4).raw(bytes_of("abc")).take();
  answer.insert(answer.end(), short_column.begin(), short_column.end());
  CHECK_THROWS_AS(wire::decode_gather_reply(answer), wire::DecodeError);
  CHECK_THROWS_AS(wire::encode_gather("g", 1, {}, 2, 3, bytes_of("12345")), std::invalid_argument);
}

namespace {

// A GATHER answer with these records and an empty column of width 0.
Bytes gather_answer(const std::vector<Bytes>& owned) {
  const std::vector<std::span<const std::uint8_t>> records(owned.begin(), owned.end());
  Bytes answer = wire::encode_gather_records(records);
  const Bytes tail = wire::Writer().u32(0).take();
  answer.insert(answer.end(), tail.begin(), tail.end());
  return answer;
}

void check_round_trip(const std::vector<Bytes>& owned) {
  auto v = wire::decode_gather_reply(gather_answer(owned));
  REQUIRE(v.records.size() == owned.size());
  for (std::size_t i = 0; i < owned.size(); ++i) {
    CHECK(Bytes(v.records[i].begin(), v.records[i].end()) == owned[i]);
  }
}

// A records block by hand: n, total, and the coded bytes.
Bytes records_block(std::uint32_t n, std::uint32_t total, const Bytes& coded) {
  return wire::Writer().u32(n).u32(total).bytes(coded).u32(0).take();
}

}  // namespace

TEST_CASE("gather answers code each record against the one before", "[wire]") {
  // 4096 records as the ranks of 8-rank hosts send them: alike but for a few bytes.
  std::vector<Bytes> owned;
  std::size_t plain = 0;
  for (int i = 0; i < 4096; ++i) {
    owned.push_back(bytes_of("v2|host-index " + std::to_string(i / 8) + "|local " +
                             std::to_string(i % 8) +
                             "|8|198.18.0.11|seq -1|hostname node-0001.cluster"));
    plain += 4 + owned.back().size();
  }
  const std::vector<std::span<const std::uint8_t>> records(owned.begin(), owned.end());
  const Bytes block = wire::encode_gather_records(records);
  CHECK(block.size() * 8 < plain);  // the point of it: an eighth of the bytes, or less
  auto v = wire::decode_gather_reply(gather_answer(owned));
  REQUIRE(v.records.size() == owned.size());
  for (std::size_t i = 0; i < owned.size(); ++i) {
    CHECK(Bytes(v.records[i].begin(), v.records[i].end()) == owned[i]);
  }
  // Moving the decoded answer keeps its views valid (they point into its own buffer).
  auto moved = std::move(v);
  CHECK(Bytes(moved.records[7].begin(), moved.records[7].end()) == owned[7]);
}

TEST_CASE("gather records of any shape survive the coding", "[wire]") {
  SECTION("none") { check_round_trip({}); }
  SECTION("empty ones, between and after others") {
    check_round_trip({{}, bytes_of("abc"), {}, {}, bytes_of("abc"), {}});
  }
  SECTION("growing, shrinking, equal, and wholly different") {
    check_round_trip({bytes_of("a"), bytes_of("ab"), bytes_of("abcdef"), bytes_of("abc"),
                      bytes_of("abc"), bytes_of("xyz"), bytes_of("xbzdefgh"), bytes_of("x")});
  }
  SECTION("differences separated by short and long equal stretches") {
    check_round_trip({bytes_of("0123456789abcdef"), bytes_of("X1X3456789aXcdeX"),
                      bytes_of("X1Y3456789aXcdeY"), bytes_of("0123456789abcdef")});
  }
  SECTION("records longer than a one-byte varint, and every byte value") {
    Bytes big(300), other(70000);
    for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::uint8_t>(i);
    for (std::size_t i = 0; i < other.size(); ++i) other[i] = static_cast<std::uint8_t>(i * 7);
    Bytes big2 = big;
    big2[200] ^= 0xff;
    check_round_trip({big, big2, other, big});
  }
}

TEST_CASE("a malformed gather records block is refused", "[wire]") {
  // Record 0: "ab" (len 2, one patch: skip 0, 2 literal bytes); record 1: "ax" (len 2, one
  // patch at 1 of 1 byte).
  const Bytes good{2, 1, 0, 2, 'a', 'b', 2, 1, 1, 1, 'x'};
  auto v = wire::decode_gather_reply(records_block(2, 4, good));
  REQUIRE(v.records.size() == 2);
  CHECK(Bytes(v.records[1].begin(), v.records[1].end()) == bytes_of("ax"));

  SECTION("a total that does not match the records") {
    CHECK_THROWS_WITH(wire::decode_gather_reply(records_block(2, 5, good)),
                      Catch::Contains("fill 4 of the 5 bytes declared"));
    CHECK_THROWS_WITH(wire::decode_gather_reply(records_block(2, 3, good)),
                      Catch::Contains("runs past the 3 bytes"));
  }
  SECTION("a total or count the coded bytes cannot hold, refused before allocating") {
    CHECK_THROWS_WITH(wire::decode_gather_reply(records_block(1, 0xFFFFFFF0u, {})),
                      Catch::Contains("at most"));
    CHECK_THROWS_WITH(wire::decode_gather_reply(records_block(2, 1000, good)),
                      Catch::Contains("2 records of 1000 bytes in 11 coded bytes"));
    CHECK_THROWS_AS(wire::decode_gather_reply(records_block(100, 4, good)), wire::DecodeError);
  }
  SECTION("bytes past the previous record that no patch sets") {
    // Record 1 claims 3 bytes but only patches byte 1: byte 2 would come from nowhere.
    const Bytes hole{2, 1, 0, 2, 'a', 'b', 3, 1, 1, 1, 'x'};
    CHECK_THROWS_WITH(wire::decode_gather_reply(records_block(2, 5, hole)),
                      Catch::Contains("unpatched"));
  }
  SECTION("a patch outside its record, or skipping bytes the previous record lacks") {
    const Bytes outside{2, 1, 0, 3, 'a', 'b', 'c'};
    CHECK_THROWS_WITH(wire::decode_gather_reply(records_block(1, 2, outside)),
                      Catch::Contains("does not fit"));
    const Bytes skip_past{2, 1, 1, 1, 'b'};  // the first record has no previous bytes to keep
    CHECK_THROWS_WITH(wire::decode_gather_reply(records_block(1, 2, skip_past)),
                      Catch::Contains("does not fit"));
  }
  SECTION("a literal running past the coded bytes, a truncated varint, leftover bytes") {
    const Bytes cut{2, 1, 0, 2, 'a'};
    CHECK_THROWS_WITH(wire::decode_gather_reply(records_block(1, 2, cut)),
                      Catch::Contains("does not fit"));
    CHECK_THROWS_WITH(wire::decode_gather_reply(records_block(1, 2, Bytes{0x82, 0x80})),
                      Catch::Contains("ends inside its length"));
    Bytes extra = good;
    extra.push_back(0);
    CHECK_THROWS_WITH(wire::decode_gather_reply(records_block(2, 4, extra)),
                      Catch::Contains("1 bytes left over"));
  }
  SECTION("a varint over 32 bits") {
    const Bytes wide{0xff, 0xff, 0xff, 0xff, 0x1f, 0};
    CHECK_THROWS_WITH(wire::decode_gather_reply(records_block(1, 2, wide)),
                      Catch::Contains("does not fit 32 bits"));
  }
}

TEST_CASE("a frame's header is written in place in front of its payload", "[wire]") {
  wire::Bytes frame(wire::kHeaderBytes);
  auto payload = bytes_of("payload");
  frame.insert(frame.end(), payload.begin(), payload.end());
  wire::frame_in_place(Op::kGather, Status::kOk, 42, frame);
  CHECK(frame == wire::encode_frame(Op::kGather, Status::kOk, 42, payload));
}

TEST_CASE("a string length past the end is refused", "[wire]") {
  auto p = wire::Writer().u32(1000).raw(bytes_of("short")).take();
  CHECK_THROWS_WITH(wire::decode_del(p), Catch::Contains("truncated"));
}

TEST_CASE("op and status classification", "[wire]") {
  CHECK(wire::is_request_op(Op::kGet));
  CHECK(wire::is_request_op(Op::kGoodbye));
  CHECK_FALSE(wire::is_request_op(Op::kAuth));
  CHECK_FALSE(wire::is_request_op(Op::kAbort));
  CHECK_FALSE(wire::is_known_op(0x00));
  CHECK(wire::is_known_op(0x06));  // RESET (elastic jobs)
  CHECK_FALSE(wire::is_known_op(0x07));
  CHECK(wire::is_known_op(0x16));
  CHECK(wire::is_request_op(Op::kGather));
  CHECK_FALSE(wire::is_known_op(0x17));
  CHECK(wire::is_known_status(25));
  CHECK_FALSE(wire::is_known_status(4));
  CHECK_FALSE(wire::is_known_status(26));
  CHECK(std::string(wire::status_name(Status::kAuthFailed)) == "AUTH_FAILED");
}

TEST_CASE("durations and rank lists read naturally", "[format]") {
  using std::chrono::milliseconds;
  CHECK(format_duration(milliseconds(30000)) == "30 s");
  CHECK(format_duration(milliseconds(1500)) == "1.5 s");
  CHECK(format_duration(milliseconds(250)) == "250 ms");
  CHECK(format_ranks({3}, 16) == "rank 3 of 16");
  CHECK(format_ranks({3, 7}, 16) == "ranks 3, 7 of 16");
  CHECK(format_ranks({0, 1, 2, 5, 9, 10}, 16) == "ranks 0-2, 5, 9-10 of 16");
  std::vector<int> many;
  for (int i = 0; i < 100; i += 2) many.push_back(i);
  auto s = format_ranks(many, 100);
  CHECK_THAT(s, Catch::StartsWith("ranks 0, 2, 4"));
  CHECK_THAT(s, Catch::EndsWith(", and 18 more of 100"));
  CHECK(format_rank_list({1, 2, 3, 8}) == "1-3, 8");
  CHECK(format_endpoint("127.0.0.1", 4000) == "127.0.0.1:4000");
  CHECK(format_endpoint("::1", 4000) == "[::1]:4000");
}

TEST_CASE("a payload of 4 GiB or more is refused, not narrowed to 32 bits", "[wire]") {
  CHECK(wire::length_u32(0xFFFFFFFFu, "x") == 0xFFFFFFFFu);
  CHECK_THROWS_AS(wire::length_u32(std::size_t{1} << 32, "x"), std::length_error);
  // A real 4 GiB + 1 span, reserved but never touched: the check comes before any copy.
  const std::size_t n = (std::size_t{1} << 32) + 1;
  void* p = ::mmap(nullptr, n, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  REQUIRE(p != MAP_FAILED);
  std::span<const std::uint8_t> huge(static_cast<const std::uint8_t*>(p), n);
  CHECK_THROWS_WITH(wire::encode_frame(wire::Op::kSet, wire::Status::kOk, 1, huge),
                    Catch::Contains("does not fit a 32-bit length field"));
  wire::Writer w;
  CHECK_THROWS_AS(w.bytes(huge), std::length_error);
  ::munmap(p, n);
}

TEST_CASE("RESET round trips and refuses inconsistent numbers", "[wire]") {
  wire::Reset r;
  r.round = 7;
  r.interrupt = true;
  r.rank = 5;
  r.size = 6;
  r.local_rank = 1;
  r.local_size = 2;
  r.cross_rank = 2;
  r.cross_size = 3;
  r.host_index = 2;
  r.rendezvous = "198.18.0.1:40000";
  CHECK(wire::decode_reset(wire::encode(r)) == r);
  CHECK(wire::is_known_op(static_cast<std::uint8_t>(wire::Op::kReset)));
  CHECK_FALSE(wire::is_request_op(wire::Op::kReset));  // a client may not send it

  auto refused = [](wire::Reset bad) {
    CHECK_THROWS_AS(wire::decode_reset(wire::encode(bad)), wire::DecodeError);
  };
  wire::Reset bad = r;
  bad.rank = 6;  // not below size
  refused(bad);
  bad = r;
  bad.local_rank = 2;
  refused(bad);
  bad = r;
  bad.cross_size = 7;
  refused(bad);
  bad = r;
  bad.rendezvous.clear();
  refused(bad);
  Bytes payload = wire::encode(r);
  payload[4] = 2;  // interrupt is 0 or 1
  CHECK_THROWS_AS(wire::decode_reset(payload), wire::DecodeError);
  payload = wire::encode(r);
  payload.push_back(0);
  CHECK_THROWS_AS(wire::decode_reset(payload), wire::DecodeError);
}
