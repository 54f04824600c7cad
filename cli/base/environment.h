// The two shapes an environment takes in the launcher: horarun's own, as a map given to
// parse_options() (main.cc gathers environ; tests pass any), and a rank's block of variables in a
// stable order (cli/spawn/rank_environment.h builds it; the guard sets it on top of its own).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace hora::cli {

using Environment = std::map<std::string, std::string>;

using EnvBlock = std::vector<std::pair<std::string, std::string>>;

}  // namespace hora::cli
