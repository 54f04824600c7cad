// horarun's entry point: gathers argv and the environment, hands them to the launcher's core and
// maps its exceptions to exit codes (docs/errors.md). `horarun --guard` is the hidden guard mode
// every rank runs under (docs/launcher.md).
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/errors.h"
#include "cli/options.h"
#include "cli/rank_table.h"

extern char** environ;

namespace {

hora::cli::Environment gather_environment() {
  hora::cli::Environment env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv(*e);
    auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return env;
}

int check_build() {
#ifdef HORA_BUILT_WITH_NCCL
  const char* nccl = "yes";
#else
  const char* nccl = "no";
#endif
  fmt::print("Available backends:\n  [X] Gloo (CPU collectives)\n  [{}] NCCL (GPU collectives)\n",
             nccl[0] == 'y' ? "X" : " ");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    hora::cli::Options options = hora::cli::parse_options(args, gather_environment());
    if (!options.help_text.empty()) {
      fmt::print("{}", options.help_text);
      return 0;
    }
    if (options.check_build) return check_build();
    fmt::print(stderr, "horarun: launching is not implemented yet\n");
    return 1;
  } catch (const hora::cli::UsageError& e) {
    fmt::print(stderr, "horarun: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "horarun: {}\n", e.what());
    return 1;
  }
}
