#include <catch2/catch.hpp>

#include "cli/output/line_splitter.h"

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

TEST_CASE("a '\\n' right after a piece cut for length ends the line, no empty line") {
  SECTION("the '\\n' in the next feed") {
    LineSplitter s(4);
    Collect c;
    s.feed("abcdefgh", c.sink());  // cut into two full pieces, nothing buffered
    CHECK(c.lines == Lines{"abcd", "efgh"});
    CHECK(s.buffered() == 0);
    s.feed("\nnext\n", c.sink());
    CHECK(c.lines == Lines{"abcd", "efgh", "next"});
  }
  SECTION("the '\\n' alone in the next feed, then a real empty line") {
    LineSplitter s(4);
    Collect c;
    s.feed("abcd", c.sink());
    s.feed("\n", c.sink());
    CHECK(c.lines == Lines{"abcd"});
    s.feed("\n", c.sink());  // only the first '\n' is swallowed
    CHECK(c.lines == Lines{"abcd", ""});
  }
  SECTION("an empty feed in between changes nothing") {
    LineSplitter s(4);
    Collect c;
    s.feed("abcd", c.sink());
    s.feed("", c.sink());
    s.feed("\n\n", c.sink());
    CHECK(c.lines == Lines{"abcd", ""});
  }
  SECTION("the '\\n' in the same feed") {
    LineSplitter s(4);
    Collect c;
    s.feed("abcdefgh\nxy\n", c.sink());
    CHECK(c.lines == Lines{"abcd", "efgh", "xy"});
    s.feed("ab", c.sink());
    s.feed("cdefgh\n\n", c.sink());  // joined with a partial rest
    CHECK(c.lines == Lines{"abcd", "efgh", "xy", "abcd", "efgh", ""});
  }
  SECTION("more bytes after the piece: the '\\n' ends those, as usual") {
    LineSplitter s(4);
    Collect c;
    s.feed("abcd", c.sink());
    s.feed("e\n", c.sink());
    CHECK(c.lines == Lines{"abcd", "e"});
  }
  SECTION("the default 64 KiB piece size, fed in 4 KiB chunks") {
    LineSplitter s;
    Collect c;
    const std::string line(2 * LineSplitter::kDefaultMaxLine, 'z');
    const std::string stream = line + "\n" + "after\n";
    for (std::size_t i = 0; i < stream.size(); i += 4096) {
      s.feed(std::string_view(stream).substr(i, 4096), c.sink());
    }
    s.finish(c.sink());
    REQUIRE(c.lines.size() == 3);
    CHECK(c.lines[0] == line.substr(0, LineSplitter::kDefaultMaxLine));
    CHECK(c.lines[1] == line.substr(LineSplitter::kDefaultMaxLine));
    CHECK(c.lines[2] == "after");
  }
  SECTION("finish() after a piece adds nothing") {
    LineSplitter s(4);
    Collect c;
    s.feed("abcd", c.sink());
    s.finish(c.sink());
    CHECK(c.lines == Lines{"abcd"});
  }
}
