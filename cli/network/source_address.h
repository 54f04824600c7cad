// Which address of this machine a host sees it by, when no connection to that host tells it: the
// agents started through srun and those reached through another host (the fan-out tree).
#pragma once

#include <string>

namespace hora::cli {

// The address of this machine that packets towards `address` leave from (a UDP connect, which
// sends nothing), or "" when there is no route.
std::string source_address_towards(const std::string& address);

}  // namespace hora::cli
