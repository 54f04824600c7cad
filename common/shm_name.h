// The names of a job's shared-memory segments, written once for the runtime that creates them
// (runtime/shm/segment.h) and the guard that removes what a dead rank left behind
// (cli/spawn/shm_cleanup.h): "/hora-<16 hex digits>-<creator pid>-<n>", where the digits are the
// FNV-1a of the job secret and the host index. Two jobs, or two hosts of one job sharing a
// kernel, never share a prefix.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/fnv.h"

namespace hora {

// "/hora-<16 hex digits>", without the "-<pid>-<n>" that each segment adds.
inline std::string shm_name_prefix(const void* secret, std::size_t secret_size, int host_index) {
  // Names need to differ between jobs, not to be secret (the segment's mode keeps other users
  // out; 64 bits of a 256-bit secret reveal nothing useful about it).
  const std::uint64_t hash =
      Fnv1a64().bytes(secret, secret_size).bytes(&host_index, sizeof host_index).value();
  return fmt::format("/hora-{:016x}", hash);
}

}  // namespace hora
