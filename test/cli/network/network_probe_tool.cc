// The probe modes alone, for the namespace test: the same entry point horarun's main() calls
// (maybe_run_probe_mode), without the rest of the launcher.
#include <signal.h>

#include <cstdio>

#include "cli/network/probe.h"

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);
  const int rc = hora::cli::maybe_run_probe_mode(argc, argv);
  if (rc >= 0) return rc;
  std::fprintf(stderr,
               "usage: %s --probe-interfaces | --probe-listen TOKEN | --probe-connect TARGETS\n",
               argv[0]);
  return 2;
}
