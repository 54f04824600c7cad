// A rank that dies of a fatal signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT) says which rank it
// was, in which thread, and where, before it dies: one block on stderr, then the signal's own
// default action (or the handler the program had installed, such as Python's faulthandler), so
// the exit status and core dumps are unchanged. horarun prefixes the block with the rank like
// any other output. HORA_CRASH_REPORT=0 leaves the program's handlers alone (docs/errors.md).
#pragma once

#include <string>

namespace hora::detail {

// Installs the handlers once per process (later calls only update `who`, the text that names the
// rank: "rank 3 (host-a, pid 4242)"), and an alternate signal stack for the calling thread.
// Async-signal-safe when the signal arrives. Also installs a terminate handler that reports an
// uncaught hora::Error in one line (its message) without the native stack.
void install_crash_report(const std::string& who);

// An alternate signal stack for the calling thread, so that a stack overflow still gets its
// report; a no-op where the thread already has one. Called at the start of every thread libhora
// starts (the engine's) and by install_crash_report for the program's thread.
void install_alt_signal_stack();

}  // namespace hora::detail
