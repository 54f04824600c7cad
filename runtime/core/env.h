// The job's environment variables and the runtime's own: their names are the launcher-rank
// contract in common/job_environment.h (docs/environment.md describes them), which horarun
// sets from the same constants. core/world.cc and core/log.cc read them as env::kRank, ... (this
// alias); process/process.cc hands ::getenv to world_from_environment. Other places read
// variables of their own part, each in one function: engine/engine_options.cc
// (EngineOptions::from_environment, the engine's HORA_CYCLE_TIME_MS, HORA_FUSION_THRESHOLD,
// HORA_STALL_*, HORA_TIMELINE*, ...), nccl/backend.cc (HORA_CUDA_DEVICE, NCCL_SOCKET_IFNAME),
// gloo/sync_policy.h (HORA_GLOO_SYNC, HORA_GLOO_SYNC_BYTES: sync Gloo pairs for small
// allreduces), gloo/gloo_backend.cc (HORA_GLOO_RING: hora's pipelined ring or Gloo's own),
// process/elastic_session.cc (HORA_ELASTIC, HORA_ELASTIC_TIMEOUT, HORA_ROUND) and
// process/crash_report.cc (HORA_CRASH_REPORT). Nothing else in runtime/ calls getenv():
// scripts/check_docs.py fails on a file that does and is not named here.
#pragma once

#include "common/job_environment.h"

namespace hora::detail {
namespace env = ::hora::job_env;
}  // namespace hora::detail
