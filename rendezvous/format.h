// Wording shared by server and client messages, so every timeout reads the same way.
#pragma once

#include <chrono>
#include <string>

#include <vector>
#include "common/duration.h"

namespace hora::rdv {

// "30 s", "1.5 s", "250 ms": the one spelling in common/duration.h. Kept visible as
// rdv::format_duration for callers that spell it so; new code says hora::format_duration.
using hora::format_duration;

// "rank 3 of 16", "ranks 3, 7 of 16", "ranks 0-5, 9 of 16"; long lists are cut after 32 entries
// ("..., and 12 more"). `ranks` must be sorted and unique.
std::string format_ranks(const std::vector<int>& ranks, int size);

// The same list without " of N" and without the leading word: "3, 7", "0-5, 9".
std::string format_rank_list(const std::vector<int>& ranks);

// "host:port", with brackets around an IPv6 address: "[::1]:4000".
std::string format_endpoint(const std::string& host, unsigned port);

}  // namespace hora::rdv
