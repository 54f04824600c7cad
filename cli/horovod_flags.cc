#include "cli/horovod_flags.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "cli/errors.h"

namespace hora::cli {

void add_horovod_flags(CLI::App& app, HorovodRawFlags& raw) {
  app.add_flag("--no-horovod-rendezvous", raw.no_horovod_rendezvous,
               "do not serve Horovod's Gloo HTTP rendezvous (HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT "
               "unset); for jobs that do not use Horovod");
}

void apply_horovod_flags(const HorovodRawFlags& raw, const Environment& /*env*/, Options& options) {
  options.horovod_rendezvous = !raw.no_horovod_rendezvous;
}

std::optional<std::string> rewrite_horovod_single_dash(const std::string& /*arg*/) {
  return std::nullopt;
}

}  // namespace hora::cli
