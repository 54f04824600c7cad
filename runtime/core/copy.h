// copy_bytes and stream_bytes: the copies every large data move of the runtime goes through (the
// shared-memory collectives, the engine's fusion buffer, the reduce-scatter ring).
//
// From kVectorCopyBytes up they copy with vector loads and stores of their own, not memcpy.
// glibc 2.36 copies such sizes with `rep movsb`, which on the AMD EPYC machine hora is measured
// on ran at about half the speed of a vector loop: the shared-memory allreduce of 1 MiB at -np 4
// took 1750 us through memcpy and 950 us with glibc's `rep movsb` threshold raised out of the
// way (docs/shm.md, "Copies and reductions"). Below it, and on CPUs without AVX, memcpy.
#pragma once

#include <cstddef>

namespace hora::detail {

inline constexpr std::size_t kVectorCopyBytes = 4096;

// Copies n bytes from src to dst. The ranges must not overlap (use memmove for that).
void copy_bytes(void* dst, const void* src, std::size_t n);

// copy_bytes with non-temporal stores (from kVectorCopyBytes up, with AVX): the destination's
// lines are written to memory without being read into the cache first. For outputs too big to
// stay in the cache until they are read: a collective that writes at least kStreamOutputBytes
// into the caller's buffer copies into it this way (with 16 MiB, the shared-memory allgather,
// broadcast and allreduce took 0.70-0.96x the time with plain stores, medians of 5; docs/shm.md).
inline constexpr std::size_t kStreamOutputBytes = std::size_t{8} << 20;
void stream_bytes(void* dst, const void* src, std::size_t n);

}  // namespace hora::detail
