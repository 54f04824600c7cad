// FUZZ_CHECK(cond): a property every harness asserts. A failure prints the condition and aborts,
// which libFuzzer reports as a crash and saves the input (crash-<sha1>) for reproduction.
#pragma once

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond)                                                                 \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)
