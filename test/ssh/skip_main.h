// main() for tests that need something this machine may lack: exits 77 (Meson's "skipped") with
// the reason when `reason` is non-empty, else runs Catch2.
#pragma once

#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#define HORA_TEST_MAIN_SKIP_UNLESS(reason_expr)              \
  int main(int argc, char** argv) {                          \
    const std::string reason = (reason_expr);                \
    if (!reason.empty()) {                                   \
      std::fprintf(stderr, "skipped: %s\n", reason.c_str()); \
      return 77;                                             \
    }                                                        \
    return Catch::Session().run(argc, argv);                 \
  }
