// Every environment variable libhora reads, in one place (docs/environment.md is the contract).
// The launcher's variables describe the job; the tuning variables are optional. Nothing else in
// runtime/ calls getenv(): world.cc and log.cc read these through this list.
#pragma once

namespace hora::detail::env {

// Set by horarun for every rank. Without kRank the process runs as a world of one.
inline constexpr const char kRank[] = "HORA_RANK";
inline constexpr const char kSize[] = "HORA_SIZE";
inline constexpr const char kLocalRank[] = "HORA_LOCAL_RANK";
inline constexpr const char kLocalSize[] = "HORA_LOCAL_SIZE";
inline constexpr const char kCrossRank[] = "HORA_CROSS_RANK";
inline constexpr const char kCrossSize[] = "HORA_CROSS_SIZE";
inline constexpr const char kHostIndex[] = "HORA_HOST_INDEX";
inline constexpr const char kHostname[] = "HORA_HOSTNAME";
inline constexpr const char kRendezvous[] = "HORA_RENDEZVOUS";
inline constexpr const char kIface[] = "HORA_IFACE";
inline constexpr const char kSecret[] = "HORA_SECRET";
inline constexpr const char kStartTimeout[] = "HORA_START_TIMEOUT";  // seconds, default 30

// Tuning (optional).
inline constexpr const char kTimeout[] = "HORA_TIMEOUT_SECONDS";  // seconds, default 30
inline constexpr const char kLogLevel[] = "HORA_LOG_LEVEL";        // default "warning"
inline constexpr const char kShm[] = "HORA_SHM";                  // 0 or 1, default 1
// 0 or 1; unset: chosen by layout. HORA_ wins over HOROVOD_ when both are set.
inline constexpr const char kHierarchicalAllreduce[] = "HORA_HIERARCHICAL_ALLREDUCE";
inline constexpr const char kHorovodHierarchicalAllreduce[] = "HOROVOD_HIERARCHICAL_ALLREDUCE";

}  // namespace hora::detail::env
