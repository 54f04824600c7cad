// Exceptions of the launcher (horarun). One base, a few subclasses; main.cc maps them to exit
// codes (docs/errors.md). A message says who (rank, host:port), what step, why, and which flag
// or variable changes the outcome; it never needs a stack trace to be understood.
#pragma once

#include <stdexcept>
#include <string>

namespace hora::cli {

class Error : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The command line, a host list or a hostfile is wrong. horarun exits 2.
class UsageError : public Error {
  using Error::Error;
};

// A rank could not be started (fork/exec, pipes, the guard's request). horarun exits 1.
class SpawnError : public Error {
  using Error::Error;
};

// The guard's stdin stream was malformed (docs/launcher.md, "The guard's stdin protocol").
class GuardProtocolError : public Error {
  using Error::Error;
};

}  // namespace hora::cli
