// The job's environment variables and the runtime's own (docs/environment.md is the contract):
// the launcher's variables describe the job; the tuning variables are optional. core/world.cc
// and core/log.cc read these through this list. Other places read variables of their own
// part, each in one function: engine/engine_options.cc (EngineOptions::from_environment, the
// engine's HORA_CYCLE_TIME_MS, HORA_FUSION_THRESHOLD, HORA_STALL_*, HORA_TIMELINE*, ...),
// nccl/backend.cc (HORA_CUDA_DEVICE, NCCL_SOCKET_IFNAME) and gloo/sync_policy.h (HORA_GLOO_SYNC,
// HORA_GLOO_SYNC_BYTES: sync Gloo pairs for small allreduces). Nothing else in runtime/ calls
// getenv().
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
inline constexpr const char kLogLevel[] = "HORA_LOG_LEVEL";       // default "warning"
inline constexpr const char kShm[] = "HORA_SHM";                  // 0 or 1, default 1
// 0 or 1; unset: chosen by layout. HORA_ wins over HOROVOD_ when both are set.
inline constexpr const char kHierarchicalAllreduce[] = "HORA_HIERARCHICAL_ALLREDUCE";
inline constexpr const char kHorovodHierarchicalAllreduce[] = "HOROVOD_HIERARCHICAL_ALLREDUCE";

}  // namespace hora::detail::env
