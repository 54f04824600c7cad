#include "cli/horovod_flags.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "cli/errors.h"

namespace hora::cli {

void add_horovod_flags(CLI::App& app, HorovodRawFlags& raw) {
  app.add_flag("--no-horovod-rendezvous", raw.no_horovod_rendezvous,
               "do not serve Horovod's Gloo HTTP rendezvous (HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT "
               "unset); for jobs that do not use Horovod");
  app.add_flag("--no-env-forwarding", raw.no_env_forwarding,
               "do not forward horarun's environment to the ranks (only the contract and -x; "
               "the default forwards all but a denylist, see docs/launcher.md)");
}

void apply_horovod_flags(const HorovodRawFlags& raw, const Environment& /*env*/, Options& options) {
  options.horovod_rendezvous = !raw.no_horovod_rendezvous;
  options.forward_environment = !raw.no_env_forwarding;
}

std::optional<std::string> rewrite_horovod_single_dash(const std::string& /*arg*/) {
  return std::nullopt;
}

}  // namespace hora::cli
