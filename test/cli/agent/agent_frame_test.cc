// The agent protocol's frames (cli/agent/frame.h): encoding, incremental decoding, and the
// rejection of what is not a frame.
#include <string>

#include <catch2/catch.hpp>

#include "cli/agent/frame.h"

using namespace hora::cli::agent;

TEST_CASE("frames round-trip through the decoder however the bytes are split") {
  std::string wire;
  append_frame(wire, FrameType::kOpen, 7, encode_open(OpenRequest{"/home/a b", {"--guard"}}));
  append_frame(wire, FrameType::kStdin, 7, std::string("x\0y", 3));
  append_frame(wire, FrameType::kStdinEof, 7, {});
  append_frame(wire, FrameType::kExit, 7, encode_exit(ExitCode{3, 0}));
  for (std::size_t step : {std::size_t{1}, std::size_t{5}, wire.size()}) {
    FrameDecoder d;
    std::vector<Frame> got;
    for (std::size_t i = 0; i < wire.size(); i += step) {
      d.feed(std::string_view(wire).substr(i, step));
      while (auto f = d.next()) got.push_back(*f);
    }
    REQUIRE(d.error().empty());
    REQUIRE(got.size() == 4);
    CHECK(got[0].type == FrameType::kOpen);
    CHECK(got[0].id == 7);
    const auto open = decode_open(got[0].payload);
    REQUIRE(open);
    CHECK(open->cwd == "/home/a b");
    CHECK(open->args == std::vector<std::string>{"--guard"});
    CHECK(got[1].payload == std::string("x\0y", 3));
    CHECK(got[2].type == FrameType::kStdinEof);
    CHECK(got[2].payload.empty());
    const auto exit = decode_exit(got[3].payload);
    REQUIRE(exit);
    CHECK(exit->status == 3);
    CHECK(exit->signal == 0);
    CHECK(d.buffered() == 0);
  }
}

TEST_CASE("large data is split into chunks no bigger than kChunk") {
  const std::string data(kChunk * 2 + 5, 'a');
  std::string wire;
  append_chunked(wire, FrameType::kStdout, 1, data);
  FrameDecoder d;
  d.feed(wire);
  std::string joined;
  int frames = 0;
  while (auto f = d.next()) {
    CHECK(f->payload.size() <= kChunk);
    joined += f->payload;
    ++frames;
  }
  CHECK(frames == 3);
  CHECK(joined == data);
}

TEST_CASE("an unknown type or an oversized length is an error, and the stream stays failed") {
  FrameDecoder d;
  d.feed(std::string("\x7f\0\0\0\1\0\0\0\0", 9));
  CHECK_FALSE(d.next());
  CHECK(d.error().find("unknown frame type 0x7f") != std::string::npos);
  std::string ok;
  append_frame(ok, FrameType::kStdin, 1, "x");
  d.feed(ok);
  CHECK_FALSE(d.next());

  FrameDecoder big;
  big.feed(std::string("\x02\0\0\0\1\xff\xff\xff\xff", 9));
  CHECK_FALSE(big.next());
  CHECK(big.error().find("STDIN frame of 4294967295 bytes") != std::string::npos);
}

TEST_CASE("OPEN and EXIT payloads reject malformed input") {
  CHECK_FALSE(decode_open(""));                          // no argument
  CHECK_FALSE(decode_open(std::string("/tmp", 4)));      // no NUL: no argument
  CHECK_FALSE(decode_open(std::string("/tmp\0", 5)));    // an empty argument
  CHECK_FALSE(decode_open(std::string("\0a\0\0b", 5)));  // an empty argument in the middle
  const auto two = decode_open(std::string("\0--probe-listen\0tok", 19));
  REQUIRE(two);
  CHECK(two->cwd.empty());
  CHECK(two->args == std::vector<std::string>{"--probe-listen", "tok"});
  CHECK_FALSE(decode_exit("1234567"));
  CHECK_FALSE(decode_exit("123456789"));
}
