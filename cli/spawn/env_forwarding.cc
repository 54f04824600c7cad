#include "cli/spawn/env_forwarding.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>
#include <string_view>

#include "cli/output/log.h"

namespace hora::cli {
namespace {

constexpr std::string_view kDeniedNames[] = {
    "HOSTNAME",   "HOST",       "HOME",   "USER",  "LOGNAME",
    "SHELL",      "PWD",        "OLDPWD", "SHLVL", "_",
    "DISPLAY",    "XAUTHORITY", "TMPDIR", "MAIL",  "DBUS_SESSION_BUS_ADDRESS",
    "KRB5CCNAME",
};
constexpr std::string_view kDeniedPrefixes[] = {"SSH_", "BASH_FUNC_", "XDG_", "TERM"};
constexpr std::string_view kDeniedSuffixes[] = {"CUDA_VISIBLE_DEVICES"};

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

std::string random_run_id() {
  std::random_device rd;
  return fmt::format("hora-{:08x}{:08x}", rd(), rd());
}

}  // namespace

bool is_denied_variable(const std::string& name) {
  return std::any_of(std::begin(kDeniedNames), std::end(kDeniedNames),
                     [&](std::string_view n) { return n == name; }) ||
         std::any_of(std::begin(kDeniedPrefixes), std::end(kDeniedPrefixes),
                     [&](std::string_view p) { return starts_with(name, p); }) ||
         std::any_of(std::begin(kDeniedSuffixes), std::end(kDeniedSuffixes),
                     [&](std::string_view s) { return ends_with(name, s); });
}

EnvBlock forwardable_environment(const Environment& env) {
  EnvBlock out;
  for (const auto& [name, value] : env) {  // std::map: sorted by name
    if (!name.empty() && !is_denied_variable(name)) out.emplace_back(name, value);
  }
  return out;
}

void apply_launcher_environment(const Environment& env, const Options& options,
                                const RankTable& table, JobFacts& facts) {
  if (options.forward_environment) facts.inherited = forwardable_environment(env);
  facts.run_id = random_run_id();
  const bool omp_given = env.count("OMP_NUM_THREADS") != 0 ||
                         std::any_of(options.env_forward.begin(), options.env_forward.end(),
                                     [](const auto& kv) { return kv.first == "OMP_NUM_THREADS"; });
  bool crowded = false;
  for (int r = 0; r < table.size(); ++r) crowded = crowded || table.rank(r).local_size > 1;
  facts.omp_threads_default = !omp_given && crowded;
  if (facts.omp_threads_default) {
    launcher_log()->warn(
        "setting OMP_NUM_THREADS=1 for the ranks of hosts that run more than one rank, as "
        "torchrun does; set OMP_NUM_THREADS (or -x OMP_NUM_THREADS=N) to choose");
  }
}

}  // namespace hora::cli
