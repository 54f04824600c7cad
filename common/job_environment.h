// The launcher-rank environment contract: the name of every variable horarun sets for its ranks
// and libhora (or the guard that starts a rank) reads, written once for both sides. The launcher
// (cli/spawn/rank_environment.cc, cli/options/) sets them, the runtime (runtime/core/env.h and
// the getenv() calls it lists) reads them; docs/environment.md describes each, and
// test/cli/spawn/rank_environment_test.cc fails when the page and the lists below differ.
// A new variable is a constant here, an entry in one of the lists, and a row on that page.
#pragma once

#include <string_view>
#include <utility>

namespace hora::job_env {

// --- hora's job: set by horarun for every rank, read by the runtime's world
// (runtime/core/world.cc). Without kRank a program runs as a world of one.
inline constexpr char kRank[] = "HORA_RANK";
inline constexpr char kSize[] = "HORA_SIZE";
inline constexpr char kLocalRank[] = "HORA_LOCAL_RANK";
inline constexpr char kLocalSize[] = "HORA_LOCAL_SIZE";
inline constexpr char kCrossRank[] = "HORA_CROSS_RANK";
inline constexpr char kCrossSize[] = "HORA_CROSS_SIZE";
inline constexpr char kHostname[] = "HORA_HOSTNAME";
inline constexpr char kHostIndex[] = "HORA_HOST_INDEX";
inline constexpr char kRendezvous[] = "HORA_RENDEZVOUS";
inline constexpr char kIface[] = "HORA_IFACE";  // unset when horarun chose no interface
inline constexpr char kSecret[] = "HORA_SECRET";
inline constexpr char kStartTimeout[] = "HORA_START_TIMEOUT";  // seconds, default 30
inline constexpr char kLogLevel[] = "HORA_LOG_LEVEL";  // only with --log-level; default "warning"

// --- Horovod's names for the job (programs written for horovodrun).
inline constexpr char kHorovodRank[] = "HOROVOD_RANK";
inline constexpr char kHorovodSize[] = "HOROVOD_SIZE";
inline constexpr char kHorovodLocalRank[] = "HOROVOD_LOCAL_RANK";
inline constexpr char kHorovodLocalSize[] = "HOROVOD_LOCAL_SIZE";
inline constexpr char kHorovodCrossRank[] = "HOROVOD_CROSS_RANK";
inline constexpr char kHorovodCrossSize[] = "HOROVOD_CROSS_SIZE";
inline constexpr char kHorovodHostname[] = "HOROVOD_HOSTNAME";
inline constexpr char kHorovodController[] = "HOROVOD_CONTROLLER";
inline constexpr char kHorovodCpuOperations[] = "HOROVOD_CPU_OPERATIONS";
inline constexpr char kHorovodGlooIface[] = "HOROVOD_GLOO_IFACE";
// Horovod's HTTP rendezvous, which horarun serves; both unset with --no-horovod-rendezvous.
inline constexpr char kHorovodGlooRendezvousAddr[] = "HOROVOD_GLOO_RENDEZVOUS_ADDR";
inline constexpr char kHorovodGlooRendezvousPort[] = "HOROVOD_GLOO_RENDEZVOUS_PORT";

// --- torchrun's names (torch.distributed's env:// init and torchelastic's).
inline constexpr char kTorchRank[] = "RANK";
inline constexpr char kTorchWorldSize[] = "WORLD_SIZE";
inline constexpr char kTorchLocalRank[] = "LOCAL_RANK";
inline constexpr char kTorchLocalWorldSize[] = "LOCAL_WORLD_SIZE";
inline constexpr char kTorchGroupRank[] = "GROUP_RANK";
inline constexpr char kTorchRoleRank[] = "ROLE_RANK";
inline constexpr char kTorchGroupWorldSize[] = "GROUP_WORLD_SIZE";
inline constexpr char kTorchRoleName[] = "ROLE_NAME";
inline constexpr char kTorchRoleWorldSize[] = "ROLE_WORLD_SIZE";
inline constexpr char kTorchelasticRunId[] = "TORCHELASTIC_RUN_ID";
inline constexpr char kTorchelasticRestartCount[] = "TORCHELASTIC_RESTART_COUNT";
inline constexpr char kTorchelasticMaxRestarts[] = "TORCHELASTIC_MAX_RESTARTS";
inline constexpr char kMasterAddr[] = "MASTER_ADDR";
inline constexpr char kMasterPort[] = "MASTER_PORT";

// --- Interfaces, NCCL and the rest.
inline constexpr char kGlooSocketIfname[] = "GLOO_SOCKET_IFNAME";
// Also read by the NCCL backend (runtime/nccl/backend.cc) to name it in an error.
inline constexpr char kNcclSocketIfname[] = "NCCL_SOCKET_IFNAME";
inline constexpr char kNcclIbDisable[] = "NCCL_IB_DISABLE";  // only with --tcp
inline constexpr char kPythonUnbuffered[] = "PYTHONUNBUFFERED";
// Only when the user gave none and the host runs more than one rank.
inline constexpr char kOmpNumThreads[] = "OMP_NUM_THREADS";

// Every name rank_environment() (cli/spawn/rank_environment.cc) may set: -x and horarun's own
// environment do not forward these (is_contract_variable), and the launcher sets nothing else
// but the settings below and what -x gives.
inline constexpr std::string_view kContract[] = {
    kRank,
    kSize,
    kLocalRank,
    kLocalSize,
    kCrossRank,
    kCrossSize,
    kHostname,
    kHostIndex,
    kRendezvous,
    kIface,
    kSecret,
    kStartTimeout,
    kLogLevel,
    kHorovodRank,
    kHorovodSize,
    kHorovodLocalRank,
    kHorovodLocalSize,
    kHorovodCrossRank,
    kHorovodCrossSize,
    kHorovodHostname,
    kHorovodController,
    kHorovodCpuOperations,
    kHorovodGlooIface,
    kHorovodGlooRendezvousAddr,
    kHorovodGlooRendezvousPort,
    kTorchRank,
    kTorchWorldSize,
    kTorchLocalRank,
    kTorchLocalWorldSize,
    kTorchGroupRank,
    kTorchRoleRank,
    kMasterAddr,
    kMasterPort,
    kGlooSocketIfname,
    kNcclSocketIfname,
    kPythonUnbuffered,
    kNcclIbDisable,
    kTorchGroupWorldSize,
    kTorchRoleName,
    kTorchRoleWorldSize,
    kTorchelasticRunId,
    kTorchelasticRestartCount,
    kTorchelasticMaxRestarts,
    kOmpNumThreads,
};

// --- The runtime's settings (all optional): horarun sets them from its flags (horovodrun's
// spellings, cli/options/) or the user does; the runtime reads them where its comment says.
// runtime/core/world.cc:
inline constexpr char kTimeout[] = "HORA_TIMEOUT_SECONDS";  // seconds, default 30
inline constexpr char kShm[] = "HORA_SHM";                  // 0 or 1, default 1
// 0 or 1; unset: chosen by layout. HORA_ wins over HOROVOD_ when both are set.
inline constexpr char kHierarchicalAllreduce[] = "HORA_HIERARCHICAL_ALLREDUCE";
inline constexpr char kHorovodHierarchicalAllreduce[] = "HOROVOD_HIERARCHICAL_ALLREDUCE";
// runtime/gloo/sync_policy.h: small allreduces on sync Gloo pairs.
inline constexpr char kGlooSync[] = "HORA_GLOO_SYNC";
inline constexpr char kGlooSyncBytes[] = "HORA_GLOO_SYNC_BYTES";
inline constexpr char kGlooRing[] = "HORA_GLOO_RING";
// runtime/nccl/backend.cc:
inline constexpr char kCudaDevice[] = "HORA_CUDA_DEVICE";
// python/src/torch_ops.cc (hora.torch): nccl or host, the path of CUDA tensors.
inline constexpr char kGpuOperations[] = "HORA_GPU_OPERATIONS";
// python/hora/torch/__init__.py: 0 imports the extension without RTLD_DEEPBIND.
inline constexpr char kTorchDeepbind[] = "HORA_TORCH_DEEPBIND";
// runtime/process/crash_report.cc: 0 installs no fatal-signal report.
inline constexpr char kCrashReport[] = "HORA_CRASH_REPORT";
// runtime/engine/engine_options.cc (the async engine):
inline constexpr char kCycleTimeMs[] = "HORA_CYCLE_TIME_MS";
inline constexpr char kCacheCapacity[] = "HORA_CACHE_CAPACITY";
inline constexpr char kFusionThreshold[] = "HORA_FUSION_THRESHOLD";
inline constexpr char kStallCheckSeconds[] = "HORA_STALL_CHECK_SECONDS";
inline constexpr char kStallCheckDisable[] = "HORA_STALL_CHECK_DISABLE";
inline constexpr char kStallShutdownSeconds[] = "HORA_STALL_SHUTDOWN_SECONDS";
inline constexpr char kTimeline[] = "HORA_TIMELINE";
inline constexpr char kTimelineMarkCycles[] = "HORA_TIMELINE_MARK_CYCLES";
// Read by the guard that starts the rank (cli/spawn/guard.cc), not by the runtime.
inline constexpr char kBindTo[] = "HORA_BIND_TO";
inline constexpr char kMapBy[] = "HORA_MAP_BY";

inline constexpr std::string_view kSettings[] = {
    kTimeout,
    kShm,
    kHierarchicalAllreduce,
    kHorovodHierarchicalAllreduce,
    kGlooSync,
    kGlooSyncBytes,
    kGlooRing,
    kCudaDevice,
    kGpuOperations,
    kTorchDeepbind,
    kCrashReport,
    kCycleTimeMs,
    kCacheCapacity,
    kFusionThreshold,
    kStallCheckSeconds,
    kStallCheckDisable,
    kStallShutdownSeconds,
    kTimeline,
    kTimelineMarkCycles,
    kBindTo,
    kMapBy,
};

// --- Horovod's names for hora's settings: wherever horarun sets the hora name (its flags, its
// --config-file), it also sets Horovod's with the same value, for Horovod programs.
inline constexpr char kHorovodFusionThreshold[] = "HOROVOD_FUSION_THRESHOLD";
inline constexpr char kHorovodCycleTime[] = "HOROVOD_CYCLE_TIME";
inline constexpr char kHorovodCacheCapacity[] = "HOROVOD_CACHE_CAPACITY";
inline constexpr char kHorovodTimeline[] = "HOROVOD_TIMELINE";
inline constexpr char kHorovodTimelineMarkCycles[] = "HOROVOD_TIMELINE_MARK_CYCLES";
inline constexpr char kHorovodStallCheckDisable[] = "HOROVOD_STALL_CHECK_DISABLE";
inline constexpr char kHorovodStallCheckTimeSeconds[] = "HOROVOD_STALL_CHECK_TIME_SECONDS";
inline constexpr char kHorovodStallShutdownTimeSeconds[] = "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS";
inline constexpr char kHorovodGlooTimeoutSeconds[] = "HOROVOD_GLOO_TIMEOUT_SECONDS";

// {hora's name, Horovod's name}.
inline constexpr std::pair<const char*, const char*> kHoraToHorovod[] = {
    {kFusionThreshold, kHorovodFusionThreshold},
    {kCycleTimeMs, kHorovodCycleTime},
    {kCacheCapacity, kHorovodCacheCapacity},
    {kTimeline, kHorovodTimeline},
    {kTimelineMarkCycles, kHorovodTimelineMarkCycles},
    {kStallCheckDisable, kHorovodStallCheckDisable},
    {kStallCheckSeconds, kHorovodStallCheckTimeSeconds},
    {kStallShutdownSeconds, kHorovodStallShutdownTimeSeconds},
    {kTimeout, kHorovodGlooTimeoutSeconds},
};

// --- Horovod's own settings, passed on from horovodrun's flags for Horovod programs; hora reads
// none of them (HOROVOD_HIERARCHICAL_ALLREDUCE, which it reads, is among the settings above).
inline constexpr char kHorovodLogLevel[] = "HOROVOD_LOG_LEVEL";
inline constexpr char kHorovodLogHideTime[] = "HOROVOD_LOG_HIDE_TIME";
inline constexpr char kHorovodHierarchicalAllgather[] = "HOROVOD_HIERARCHICAL_ALLGATHER";
inline constexpr char kHorovodTorusAllreduce[] = "HOROVOD_TORUS_ALLREDUCE";
inline constexpr char kHorovodMpiThreadsDisable[] = "HOROVOD_MPI_THREADS_DISABLE";
inline constexpr char kHorovodNumNcclStreams[] = "HOROVOD_NUM_NCCL_STREAMS";
inline constexpr char kHorovodThreadAffinity[] = "HOROVOD_THREAD_AFFINITY";
inline constexpr char kHorovodAutotune[] = "HOROVOD_AUTOTUNE";
inline constexpr char kHorovodAutotuneLog[] = "HOROVOD_AUTOTUNE_LOG";
inline constexpr char kHorovodAutotuneWarmupSamples[] = "HOROVOD_AUTOTUNE_WARMUP_SAMPLES";
inline constexpr char kHorovodAutotuneStepsPerSample[] = "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE";
inline constexpr char kHorovodAutotuneBayesOptMaxSamples[] =
    "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES";
inline constexpr char kHorovodAutotuneGaussianProcessNoise[] =
    "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE";

// --- Elastic jobs (docs/elastic.md): set for every worker of a job started with --min-np,
// --max-np or --host-discovery-script, read by runtime/process/elastic_session.cc.
inline constexpr char kElastic[] = "HORA_ELASTIC";                 // "1"
inline constexpr char kRound[] = "HORA_ROUND";                     // the round at the start
inline constexpr char kWorkerId[] = "HORA_WORKER_ID";              // stable across rounds
inline constexpr char kElasticTimeout[] = "HORA_ELASTIC_TIMEOUT";  // seconds to wait for a round
// Horovod's own switch for its elastic mode (horovodrun sets it): a worker with it asks
// GET /rank_and_size after every reset (docs/elastic.md, "Horovod elastic programs").
inline constexpr char kHorovodElastic[] = "HOROVOD_ELASTIC";  // "1"

inline constexpr std::string_view kElasticContract[] = {kElastic, kRound, kWorkerId,
                                                        kElasticTimeout, kHorovodElastic};

// Read by horarun from its own environment, never set for ranks (docs/environment.md, "Read by
// horarun itself").
inline constexpr char kAllowSrunStep[] = "HORA_ALLOW_SRUN_STEP";  // "1": run as a task of srun
inline constexpr char kAgentTimeoutSeconds[] =
    "HORA_AGENT_TIMEOUT_SECONDS";  // an agent's silence that ends the job

inline constexpr std::string_view kLauncherSettings[] = {kAllowSrunStep, kAgentTimeoutSeconds};

// Set and read by hora's Python side and its build, never by horarun or libhora
// (docs/environment.md, "Set and read by hora's Python tools and build"): named here so that the
// page and this header list the same variables.
inline constexpr char kRunPort[] = "HORA_RUN_PORT";    // hora.run: the caller's port
inline constexpr char kRunToken[] = "HORA_RUN_TOKEN";  // hora.run: the job's token
inline constexpr char kVenvRoot[] = "HORA_VENV_ROOT";  // scripts/venv.sh: where venvs live
inline constexpr char kTfPython[] = "HORA_TF_PYTHON";  // the build: TensorFlow's python
// hora.torch: "1" gives the gradients of the sum of the ranks' losses
inline constexpr char kTorchSumGradients[] = "HORA_TORCH_SUM_GRADIENTS";

inline constexpr std::string_view kToolSettings[] = {kRunPort, kRunToken, kVenvRoot, kTfPython,
                                                     kTorchSumGradients};

inline constexpr std::string_view kHorovodSettings[] = {
    kHorovodLogLevel,
    kHorovodLogHideTime,
    kHorovodHierarchicalAllgather,
    kHorovodTorusAllreduce,
    kHorovodMpiThreadsDisable,
    kHorovodNumNcclStreams,
    kHorovodThreadAffinity,
    kHorovodAutotune,
    kHorovodAutotuneLog,
    kHorovodAutotuneWarmupSamples,
    kHorovodAutotuneStepsPerSample,
    kHorovodAutotuneBayesOptMaxSamples,
    kHorovodAutotuneGaussianProcessNoise,
};

}  // namespace hora::job_env
