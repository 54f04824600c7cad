#include <catch2/catch.hpp>

#include "cli/base/errors.h"
#include "cli/spawn/guard_request.h"

using Catch::Matchers::Contains;
using hora::cli::GuardProtocolError;
using hora::cli::GuardRequest;

namespace {
GuardRequest sample() {
  GuardRequest r;
  r.cwd = "/home/ann/work dir";
  r.env = {{"HORA_RANK", "3"}, {"MULTI", "line1\nline2"}, {"EQ", "a=b"}, {"EMPTY", ""}};
  r.argv = {"./train", "--name", "with space", ""};
  r.grace = std::chrono::milliseconds(1234);
  return r;
}
}  // namespace

TEST_CASE("encode/decode round trip, any byte but NUL") {
  const GuardRequest r = sample();
  const std::string wire = r.encode();
  CHECK(wire.rfind("HORA-GUARD 1\n", 0) == 0);
  std::size_t consumed = 0;
  auto back = GuardRequest::decode(wire + "terminate\n", consumed);
  REQUIRE(back.has_value());
  CHECK(consumed == wire.size());
  CHECK(back->cwd == r.cwd);
  CHECK(back->env == r.env);
  CHECK(back->argv == r.argv);
  CHECK(back->grace == r.grace);
}

TEST_CASE("every proper prefix is incomplete, never an error") {
  const std::string wire = sample().encode();
  for (std::size_t n = 0; n < wire.size(); ++n) {
    std::size_t consumed = 0;
    INFO("prefix length " << n);
    CHECK_FALSE(GuardRequest::decode(std::string_view(wire).substr(0, n), consumed).has_value());
  }
}

TEST_CASE("malformed requests are rejected with a reason") {
  std::size_t c = 0;
  CHECK_THROWS_WITH(GuardRequest::decode("GET / HTTP/1.1\r\n", c), Contains("HORA-GUARD 1"));
  CHECK_THROWS_WITH(GuardRequest::decode("HORA-GUARD 1\nbogus 0\n\n", c),
                    Contains("unknown record"));
  CHECK_THROWS_WITH(GuardRequest::decode("HORA-GUARD 1\narg x\nls\n", c), Contains("bad length"));
  CHECK_THROWS_WITH(GuardRequest::decode("HORA-GUARD 1\narg 2\nlsX", c),
                    Contains("not terminated"));
  CHECK_THROWS_WITH(GuardRequest::decode("HORA-GUARD 1\nstart 0\n\n", c), Contains("no command"));
  CHECK_THROWS_WITH(GuardRequest::decode("HORA-GUARD 1\nenv 3\nABC\n", c), Contains("NAME=VALUE"));
  CHECK_THROWS_WITH(GuardRequest::decode("HORA-GUARD 1\narg 99999999999\n", c),
                    Contains("bad length"));
  CHECK_THROWS_WITH(GuardRequest::decode("HORA-GUARD 1\n" + std::string(100, 'x'), c),
                    Contains("longer than 64"));
}

TEST_CASE("values a process cannot receive are refused when encoding") {
  GuardRequest r = sample();
  r.argv.push_back(std::string("a\0b", 3));
  CHECK_THROWS_AS(r.encode(), GuardProtocolError);
  r = sample();
  r.env.emplace_back("BAD=NAME", "x");
  CHECK_THROWS_AS(r.encode(), GuardProtocolError);
  r = sample();
  r.argv.clear();
  CHECK_THROWS_AS(r.encode(), GuardProtocolError);
}
