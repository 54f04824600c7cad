#include "common/text.h"

#include <catch2/catch.hpp>

TEST_CASE("trim removes std::isspace's characters at both ends, none inside") {
  CHECK(hora::trim("  a b \t\r\n\v\f") == "a b");
  CHECK(hora::trim("\t\nx") == "x");
  CHECK(hora::trim("x") == "x");
  CHECK(hora::trim("") == "");
  CHECK(hora::trim(" \t\r\n ") == "");
}

TEST_CASE("trim with a set of its own leaves the other whitespace") {
  CHECK(hora::trim(" a\f\t", " \t") == "a\f");
  CHECK(hora::trim("\r key: v \r", " \t\r") == "key: v");
  CHECK(hora::trim("\n", " \t") == "\n");
}

TEST_CASE("trim_end removes only trailing whitespace") {
  CHECK(hora::trim_end("  error text\r\n") == "  error text");
  CHECK(hora::trim_end("no change") == "no change");
  CHECK(hora::trim_end(" \n") == "");
  CHECK(hora::trim_end("a\t", " ") == "a\t");
}

TEST_CASE("trim returns a view into its argument") {
  const std::string s = "  abc  ";
  const std::string_view t = hora::trim(s);
  CHECK(t.data() == s.data() + 2);
  CHECK(t.size() == 3);
}

TEST_CASE("lower changes ASCII letters only") {
  CHECK(hora::lower("Accept-NEW") == "accept-new");
  CHECK(hora::lower("[Host.Example]:22") == "[host.example]:22");
  CHECK(hora::lower("") == "");
  CHECK(hora::lower("\xc3\x89t\xc3\xa9") == "\xc3\x89t\xc3\xa9");  // UTF-8 bytes as they are
}

TEST_CASE("rank_name: with and without the host and the size") {
  CHECK(hora::rank_name(3, "server1") == "rank 3 on server1");
  CHECK(hora::rank_name(3, "") == "rank 3");
  CHECK(hora::rank_name(2, 4, "server1") == "rank 2 of 4 on server1");
  CHECK(hora::rank_name(2, 4, "") == "rank 2 of 4");
}
