#include "runtime/core/world.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

#include <fmt/format.h>
#include <hora/error.h>

#include "rendezvous/errors.h"
#include "rendezvous/secret.h"
#include "runtime/core/env.h"

namespace hora::detail {
namespace {

// Every message ends with this hint: a malformed HORA_* variable almost always means the
// program was started by something other than horarun, or the environment was edited.
constexpr const char kLauncherHint[] =
    "horarun sets it for every rank (docs/environment.md); unset HORA_RANK to run as a world "
    "of one";

[[noreturn]] void bad_value(const char* name, const std::string& value,
                            const std::string& expected) {
  throw UsageError(
      fmt::format("{}='{}' is not valid: expected {}; {}", name, value, expected, kLauncherHint));
}

std::string required(const EnvLookup& lookup, const char* name) {
  const char* value = lookup(name);
  if (value == nullptr) {
    throw UsageError(
        fmt::format("{} is set but {} is missing; {}", env::kRank, name, kLauncherHint));
  }
  return value;
}

int parse_int(const char* name, const std::string& text, int min, int max,
              const std::string& expected) {
  int value = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  auto [end, ec] = std::from_chars(first, last, value);
  if (text.empty() || ec != std::errc() || end != last || value < min || value > max) {
    bad_value(name, text, expected);
  }
  return value;
}

// Positive seconds, fractions allowed ("0.5"), as milliseconds.
std::chrono::milliseconds parse_seconds(const char* name, const std::string& text) {
  const std::string expected = "a positive number of seconds, e.g. 30 or 2.5";
  if (text.empty()) bad_value(name, text, expected);
  char* end = nullptr;
  errno = 0;
  const double seconds = std::strtod(text.c_str(), &end);
  if (errno != 0 || end != text.c_str() + text.size() || !std::isfinite(seconds) || seconds <= 0 ||
      seconds > 1e7) {
    bad_value(name, text, expected);
  }
  return std::chrono::milliseconds(std::max<long long>(1, std::llround(seconds * 1000.0)));
}

// The job secret through rendezvous/secret.h (the one parser of it), as a UsageError with the
// launcher hint. Its message never echoes the value.
rdv::Secret parse_secret(const std::string& text) {
  try {
    return rdv::parse_secret_hex(text, env::kSecret);
  } catch (const rdv::Error& e) {
    throw UsageError(fmt::format("{}; {}", e.what(), kLauncherHint));
  }
}

std::string local_hostname() {
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0) return "localhost";
  return name.data();
}

}  // namespace

void parse_host_port(const std::string& text, const char* what, std::string& host,
                     std::uint16_t& port) {
  const std::string expected = "host:port or [ipv6-address]:port, e.g. 10.0.0.1:40123";
  std::string host_part;
  std::string port_part;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      bad_value(what, text, expected);
    }
    host_part = text.substr(1, close - 1);
    port_part = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string::npos || text.find(':') != colon) bad_value(what, text, expected);
    host_part = text.substr(0, colon);
    port_part = text.substr(colon + 1);
  }
  int number = 0;
  const char* last = port_part.data() + port_part.size();
  auto [end, ec] = std::from_chars(port_part.data(), last, number);
  if (host_part.empty() || port_part.empty() || ec != std::errc() || end != last || number < 1 ||
      number > 65535) {
    bad_value(what, text, expected);
  }
  host = host_part;
  port = static_cast<std::uint16_t>(number);
}

WorldInfo world_from_environment(const EnvLookup& lookup) {
  WorldInfo world;

  if (const char* timeout = lookup(env::kTimeout))
    world.timeout = parse_seconds(env::kTimeout, timeout);
  if (const char* start = lookup(env::kStartTimeout)) {
    world.start_timeout = parse_seconds(env::kStartTimeout, start);
  }
  if (const char* iface = lookup(env::kIface)) world.iface = iface;
  auto flag = [](const char* name, const char* text) {
    if (std::string(text) == "0") return 0;
    if (std::string(text) == "1") return 1;
    bad_value(name, text, "0 or 1");
  };
  if (const char* shm = lookup(env::kShm)) world.shm = flag(env::kShm, shm) == 1;
  if (const char* h = lookup(env::kHierarchicalAllreduce)) {
    world.hierarchical_allreduce = flag(env::kHierarchicalAllreduce, h);
  } else if (const char* hv = lookup(env::kHorovodHierarchicalAllreduce)) {
    world.hierarchical_allreduce = flag(env::kHorovodHierarchicalAllreduce, hv);
  }

  const char* rank = lookup(env::kRank);
  if (rank == nullptr) {
    // A world of one: `./train` without horarun. Nothing else is required.
    const char* hostname = lookup(env::kHostname);
    world.hostname = hostname != nullptr && *hostname != '\0' ? hostname : local_hostname();
    return world;
  }

  constexpr int kMax = 1 << 24;
  world.size = parse_int(env::kSize, required(lookup, env::kSize), 1, kMax,
                         "the number of ranks, a positive integer");
  world.rank = parse_int(env::kRank, rank, 0, world.size - 1,
                         fmt::format("an integer in 0..{} ({} is {})", world.size - 1, env::kSize,
                                     world.size));
  world.local_size = parse_int(env::kLocalSize, required(lookup, env::kLocalSize), 1, world.size,
                               fmt::format("an integer in 1..{} (ranks on this host)", world.size));
  world.local_rank =
      parse_int(env::kLocalRank, required(lookup, env::kLocalRank), 0, world.local_size - 1,
                fmt::format("an integer in 0..{} ({} is {})", world.local_size - 1, env::kLocalSize,
                            world.local_size));
  world.cross_size =
      parse_int(env::kCrossSize, required(lookup, env::kCrossSize), 1, world.size,
                fmt::format("an integer in 1..{} (hosts with this local rank)", world.size));
  world.cross_rank =
      parse_int(env::kCrossRank, required(lookup, env::kCrossRank), 0, world.cross_size - 1,
                fmt::format("an integer in 0..{} ({} is {})", world.cross_size - 1, env::kCrossSize,
                            world.cross_size));
  world.host_index =
      parse_int(env::kHostIndex, required(lookup, env::kHostIndex), 0, world.size - 1,
                fmt::format("an integer in 0..{} (this host's index in the host list)",
                            world.size - 1));
  const char* hostname = lookup(env::kHostname);
  world.hostname = hostname != nullptr && *hostname != '\0' ? hostname : local_hostname();

  parse_host_port(required(lookup, env::kRendezvous), env::kRendezvous, world.rendezvous_host,
                  world.rendezvous_port);
  world.secret = parse_secret(required(lookup, env::kSecret));
  return world;
}

WorldInfo world_from_environment() {
  return world_from_environment([](const char* name) { return std::getenv(name); });
}

}  // namespace hora::detail
