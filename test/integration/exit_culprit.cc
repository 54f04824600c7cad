// A rank program for the culprit cases of horarun's integration tests and for scripts/soak.sh:
// every rank runs STEPS allreduces; at step STEP, rank CULPRIT leaves the way MODE says, with
// exit code CODE, while its peers are inside (or about to enter) the next allreduce. horarun must
// name rank CULPRIT and exit with its code (or 128 + its signal), whatever the peers do when they
// lose it. Public API only.
//
//   exit_culprit MODE CODE STEP CULPRIT [STEPS]
//   MODE: exit        std::exit(CODE): libhora's exit handler says goodbye, then the exit code
//         atexit      the program's own exit handler ends the process with _exit(CODE)
//         quick_exit  std::quick_exit(CODE): no exit handlers, the connection drops
//         _exit       _exit(CODE)
//         return      the rank returns CODE from main after shutdown()
//         signal      raise(CODE): the rank dies of signal CODE
//         throw       an uncaught std::runtime_error (std::terminate, SIGABRT)
#include <hora/hora.h>

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace {
int g_code = 0;
void exit_from_handler() { _exit(g_code); }
}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: exit_culprit MODE CODE STEP CULPRIT [STEPS]\n");
    return 2;
  }
  const std::string mode = argv[1];
  const int code = std::atoi(argv[2]);
  const int step = std::atoi(argv[3]);
  const int culprit = std::atoi(argv[4]);
  const int steps = argc > 5 ? std::atoi(argv[5]) : 200;
  hora::init();
  const int rank = hora::rank();
  std::vector<float> in(1024, 1.0f), out(1024);
  for (int s = 0; s < steps; ++s) {
    if (rank == culprit && s == step) {
      std::printf("rank %d leaving at step %d: %s %d\n", rank, s, mode.c_str(), code);
      std::fflush(stdout);
      g_code = code;
      if (mode == "exit") std::exit(code);
      if (mode == "atexit") {
        std::atexit(exit_from_handler);
        std::exit(0);
      }
      if (mode == "quick_exit") std::quick_exit(code);
      if (mode == "_exit") _exit(code);
      if (mode == "return") {
        hora::shutdown();
        return code;
      }
      if (mode == "signal") {
        signal(code, SIG_DFL);
        raise(code);
      }
      if (mode == "throw") throw std::runtime_error("exit_culprit: thrown on purpose");
      std::fprintf(stderr, "exit_culprit: unknown mode %s\n", mode.c_str());
      return 2;
    }
    hora::allreduce(in.data(), out.data(), in.size(), hora::DataType::kFloat32,
                    hora::ReduceOp::kSum);
  }
  hora::shutdown();
  return 0;
}
