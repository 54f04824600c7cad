// The whole content of a file as a string ("" when it cannot be read): how the tests read what
// a program or a unit under test wrote.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace hora::test {

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace hora::test
