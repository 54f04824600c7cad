// Removing a job's shared-memory segments that outlived their creator (docs/shm.md, "Lifetime").
//
// A host's local rank 0 creates each segment and unlinks its name as soon as every local rank
// mapped it; a job that ends before that (a rank killed, horarun killed or interrupted, a rank
// that never calls shm_open) would leave the name in /dev/shm. The guard every rank runs under
// (spawn/guard.h) survives all of these: once its rank and everything the rank left behind are
// gone it calls remove_orphan_segments() with its rank's HORA_SECRET and HORA_HOST_INDEX, which
// unlinks this job's segments on this host whose creating process is dead. A segment whose
// creator still runs (another rank of the job, still attaching) is left to that creator's guard.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace hora::cli {

// "/hora-<16 hex digits>" of common/shm_name.h for a rank's HORA_SECRET (64 hex digits) and
// HORA_HOST_INDEX, or nothing when either is missing or malformed (not a hora rank).
std::optional<std::string> shm_prefix_for(const char* secret_hex, const char* host_index);

// Unlinks every "<prefix>-<pid>-<n>" in `dir` (the directory behind shm_open's names) whose pid
// is not a live process. Returns the names it removed (with their leading '/').
std::vector<std::string> remove_orphan_segments(const std::string& prefix,
                                                const std::string& dir = "/dev/shm");

}  // namespace hora::cli
