// Turns whatever a step threw (rdv::*, gloo::*, std::exception) into a hora::Error subclass
// whose message says who (rank, host), which step, why, and what to change. Backends that know
// more (Gloo: which peer) translate their own errors first and throw hora::Error, which passes
// through unchanged.
#pragma once

#include <string>

#include "runtime/core/abort_state.h"
#include "runtime/core/world.h"

namespace hora::detail {

// "rank 2 on server1"
std::string who(const WorldInfo& world);

// Call from a catch block only. `hint` is appended to timeouts ("raise HORA_START_TIMEOUT ...").
// When the job was aborted, every failure becomes hora::AbortedError with the launcher's reason.
[[noreturn]] void rethrow_translated(const WorldInfo& world, const std::string& step,
                                     const AbortState& abort, const std::string& timeout_hint);

// "hora: rank R: job aborted by launcher: <reason>" (also the AbortedError text).
std::string aborted_message(const WorldInfo& world, const std::string& step,
                            const std::string& reason);

}  // namespace hora::detail
