#include <catch2/catch.hpp>

#include "cli/line_splitter.h"

using hora::cli::LineSplitter;
using Lines = std::vector<std::string>;

namespace {
struct Collect {
  Lines lines;
  LineSplitter::Sink sink() {
    return [this](std::string_view l) { lines.emplace_back(l); };
  }
};
}  // namespace

TEST_CASE("whole lines pass through, the partial rest waits") {
  LineSplitter s;
  Collect c;
  s.feed("one\ntwo\nthr", c.sink());
  CHECK(c.lines == Lines{"one", "two"});
  CHECK(s.buffered() == 3);
  s.feed("ee\n", c.sink());
  CHECK(c.lines == Lines{"one", "two", "three"});
  CHECK(s.buffered() == 0);
}

TEST_CASE("a line split into single bytes comes out whole") {
  LineSplitter s;
  Collect c;
  for (char ch : std::string("hello world\n\nx\n")) s.feed(std::string_view(&ch, 1), c.sink());
  CHECK(c.lines == Lines{"hello world", "", "x"});
}

TEST_CASE("finish flushes an unterminated last line, once") {
  LineSplitter s;
  Collect c;
  s.feed("a\nno newline", c.sink());
  s.finish(c.sink());
  s.finish(c.sink());
  CHECK(c.lines == Lines{"a", "no newline"});
  LineSplitter empty;
  Collect none;
  empty.finish(none.sink());
  CHECK(none.lines.empty());
}

TEST_CASE("lines longer than the limit are cut into pieces, nothing lost") {
  LineSplitter s(4);
  Collect c;
  s.feed("abcdefghij", c.sink());  // no newline yet: pieces of 4 leave "ij"
  CHECK(c.lines == Lines{"abcd", "efgh"});
  s.feed("\n0123456789\n", c.sink());
  CHECK(c.lines == Lines{"abcd", "efgh", "ij", "0123", "4567", "89"});
  CHECK(s.buffered() == 0);
}

TEST_CASE("bytes, including NUL and CR, are kept") {
  LineSplitter s;
  Collect c;
  s.feed(std::string_view("a\0b\r\n", 5), c.sink());
  REQUIRE(c.lines.size() == 1);
  CHECK(c.lines[0] == std::string("a\0b\r", 4));
}
