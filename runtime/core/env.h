// The job's environment variables and the runtime's own: their names are the launcher-rank
// contract in common/job_environment.h (docs/environment.md describes them), which horarun
// sets from the same constants. core/world.cc and core/log.cc read them as env::kRank, ... (this
// alias). Other places read variables of their own part, each in one function:
// engine/engine_options.cc (EngineOptions::from_environment, the engine's HORA_CYCLE_TIME_MS,
// HORA_FUSION_THRESHOLD, HORA_STALL_*, HORA_TIMELINE*, ...), nccl/backend.cc (HORA_CUDA_DEVICE,
// NCCL_SOCKET_IFNAME) and gloo/sync_policy.h (HORA_GLOO_SYNC, HORA_GLOO_SYNC_BYTES: sync Gloo
// pairs for small allreduces) and process/crash_report.cc (HORA_CRASH_REPORT). Nothing else in
// runtime/ calls getenv().
#pragma once

#include "common/job_environment.h"

namespace hora::detail {
namespace env = ::hora::job_env;
}  // namespace hora::detail
