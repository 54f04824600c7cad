#include "runtime/process/runtime.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <hora/error.h>
#include <hora/hora.h>

#include "common/text.h"
#include "rendezvous/client.h"
#include "runtime/core/blocks.h"
#include "runtime/core/error_translation.h"
#include "runtime/core/log.h"
#include "runtime/core/peer_loss.h"
#include "runtime/core/reduce.h"
#include "runtime/gloo/engine_transport.h"
#include "runtime/gloo/gloo_backend.h"
#include "runtime/gloo/mesh.h"
#include "runtime/gloo/set_mesh.h"
#include "runtime/nccl/backend.h"
#include "runtime/process/hierarchical_allreduce.h"
#include "runtime/shm/engine_transport.h"
#include "runtime/shm/form_group.h"
#include "runtime/shm/shm_backend.h"
#include "runtime/shm/shm_group.h"

namespace hora::detail {
namespace {

using Clock = std::chrono::steady_clock;

// The sum of counts or splits; a sum past 64 bits is the caller's mistake, named as such.
std::size_t sum(const WorldInfo& world, const char* what, const char* name,
                const std::vector<std::size_t>& v) {
  std::size_t total = 0;
  for (std::size_t x : v) {
    if (__builtin_add_overflow(total, x, &total)) {
      throw UsageError(fmt::format("{}: hora::{}: {} [{}] add up to more elements than fit in 64 "
                                   "bits ({}[i] is the number of elements for rank i)",
                                   who(world), what, name, fmt::join(v, ", "), name),
                       world.rank, world.hostname);
    }
  }
  return total;
}

}  // namespace

Runtime::Runtime(WorldInfo world, ResetHandler on_reset) : world_(std::move(world)) {
  if (!world_.launched()) {
    log().debug("{}: no HORA_RANK: running as a world of one", who(world_));
    nccl_ = std::make_shared<nccl::Backend>(world_, world_.timeout);
    return;
  }
  const auto deadline = Clock::now() + world_.start_timeout;
  const std::string start_hint = "raise --start-timeout (HORA_START_TIMEOUT)";

  rdv::ClientOptions options;
  options.host = world_.rendezvous_host;
  options.port = world_.rendezvous_port;
  options.rank = world_.rank;
  options.size = world_.size;
  options.secret = world_.secret;
  options.connect_timeout = world_.start_timeout;
  try {
    client_ = rdv::Client::connect(options);
  } catch (...) {
    rethrow_translated(world_, "init(): connecting to the rendezvous server", abort_, start_hint);
  }
  // RESET frames (elastic jobs) reach the caller's handler before an interrupting one aborts
  // this runtime through the abort handler (rendezvous/client.h).
  if (on_reset) client_->set_reset_handler(std::move(on_reset));
  client_->set_abort_handler([this](const std::string& reason) { abort(reason); });
  // This rank's first PeerFailure tells the launcher whom it blames (runtime/core/peer_loss.h).
  // Not after an abort: the launcher has decided already, and the peers it stops are no cause.
  peer_loss_token_ = set_peer_loss_sink([this](int peer) {
    if (abort_.reason() || !client_) return;
    const std::string value = std::to_string(peer);
    client_->set(rdv::wire::peer_lost_key(world_.rank), rdv::Bytes(value.begin(), value.end()),
                 std::chrono::milliseconds(2000));
  });

  try {
    gloo_ =
        std::make_shared<gloo::GlooBackend>(world_,
                                            gloo::build_mesh(world_, *client_, abort_, deadline),
                                            abort_);
  } catch (...) {
    // Leave without a goodbye: the launcher must see this rank fail, not finish.
    client_.reset();
    rethrow_translated(world_, "init(): forming the Gloo communicators", abort_, start_hint);
  }
  join_shared_memory(deadline, start_hint);
  // The GPU backend forms its NCCL communicators lazily through the same rendezvous
  // connection; the launcher's abort aborts them (abort() below).
  nccl_ = std::make_shared<nccl::Backend>(world_, *client_, world_.timeout);
  log().debug("{}: joined the job ({} ranks) through {}:{}", who(world_), world_.size,
              world_.rendezvous_host, world_.rendezvous_port);
}

namespace {

// A process set's world: the job's, with the set's rank and size; local and cross scopes of one.
WorldInfo set_world_of(const WorldInfo& job, int set_id, const std::vector<int>& members) {
  WorldInfo set = job;
  set.set_id = set_id;
  set.global_rank = job.rank;
  set.rank =
      static_cast<int>(std::find(members.begin(), members.end(), job.rank) - members.begin());
  set.size = static_cast<int>(members.size());
  set.local_rank = 0;
  set.local_size = 1;
  set.cross_rank = 0;
  set.cross_size = 1;
  set.hierarchical_allreduce = 0;
  return set;
}

}  // namespace

Runtime::Runtime(Runtime& job, int set_id, const std::vector<int>& members)
    : world_(set_world_of(job.world_, set_id, members)) {
  if (!job.world_.launched() || world_.size == 1) {
    log().debug("{}: process set {} holds this rank alone: its collectives are copies", who(world_),
                set_id);
    if (job.world_.launched()) join_process_set(job, set_id, members);
    return;
  }
  const auto deadline = Clock::now() + std::max(world_.timeout, world_.start_timeout);
  auto job_gloo = job.gloo_backend("add_process_set()");
  rdv::Client* client = job.client();
  if (client == nullptr) throw_closed("add_process_set()");
  try {
    gloo_ =
        std::make_shared<gloo::GlooBackend>(world_,
                                            gloo::form_set_mesh(job_gloo->mesh(), world_, members,
                                                                true, *client, abort_, deadline),
                                            abort_);
  } catch (...) {
    rethrow_translated(world_, "add_process_set(): forming the set's Gloo communicators", abort_,
                       "raise HORA_TIMEOUT_SECONDS");
  }
  // Shared memory when every member is on this host (the job's groups are per host).
  const auto& peers = job_gloo->mesh().peers;
  bool one_host = world_.shm;
  for (int r : members) one_host = one_host && peers[r].host_index == job.world_.host_index;
  if (one_host) {
    WorldInfo group_world = world_;
    group_world.local_rank = world_.rank;
    group_world.local_size = world_.size;
    try {
      auto aborted = [this] { return abort_.reason(); };
      const std::string purpose = fmt::format("pset{}", set_id);
      auto group = shm::form_group(group_world, *client, deadline, purpose.c_str(), aborted);
      engine_shm_ =
          shm::form_group(group_world, *client, deadline, (purpose + "-engine").c_str(), aborted);
      shm_ = std::make_shared<shm::ShmBackend>(std::move(group), true);
    } catch (...) {
      rethrow_translated(world_, "add_process_set(): forming the set's shared-memory groups",
                         abort_, "raise HORA_TIMEOUT_SECONDS, or set HORA_SHM=0");
    }
    std::weak_ptr<shm::ShmBackend> weak_shm = shm_;
    std::weak_ptr<shm::ShmGroup> weak_engine = engine_shm_;
    abort_.on_abort([weak_shm, weak_engine](const std::string& reason) {
      if (auto b = weak_shm.lock()) b->abort(reason);
      if (auto g = weak_engine.lock()) g->abort(reason);
    });
  }
  log().debug("{}: joined process set {} ({} ranks, {})", who(world_), set_id, world_.size,
              shm_ ? "shared memory" : "Gloo");
}

void Runtime::join_process_set(Runtime& job, int set_id, const std::vector<int>& members) {
  WorldInfo world = job.world_;
  world.set_id = set_id;
  world.global_rank = job.world_.rank;
  if (!job.world_.launched()) return;
  auto job_gloo = job.gloo_backend("add_process_set()");
  rdv::Client* client = job.client();
  if (client == nullptr) job.throw_closed("add_process_set()");
  const auto deadline = Clock::now() + std::max(world.timeout, world.start_timeout);
  AbortState unused;
  try {
    gloo::form_set_mesh(job_gloo->mesh(), world, members, false, *client, unused, deadline);
  } catch (...) {
    rethrow_translated(world, "add_process_set(): the exchange that forms the set", job.abort_,
                       "raise HORA_TIMEOUT_SECONDS");
  }
}

void Runtime::join_shared_memory(Clock::time_point deadline, const std::string& start_hint) {
  if (world_.shm && world_.local_size > 1) {
    std::shared_ptr<shm::ShmGroup> engine_group;
    try {
      // The launcher's abort ends the wait for the other local ranks at once, and local rank 0
      // then unlinks the segment it created (docs/shm.md, "Lifetime").
      auto aborted = [this] { return abort_.reason(); };
      auto group = shm::form_group(world_, *client_, deadline, "user", aborted);
      // The global scope is this group when every rank is here (local rank i is rank i then).
      // The async engine then gets a group of its own, for its own thread.
      bool global = world_.local_size == world_.size;
      for (int i = 0; global && i < group->size(); ++i) global = group->global_rank_of(i) == i;
      if (global) engine_group = shm::form_group(world_, *client_, deadline, "engine", aborted);
      shm_ = std::make_shared<shm::ShmBackend>(std::move(group), global);
    } catch (...) {
      client_.reset();
      rethrow_translated(world_, "init(): forming the shared-memory group of this host", abort_,
                         start_hint + ", or set HORA_SHM=0");
    }
    engine_shm_ = std::move(engine_group);
    std::weak_ptr<shm::ShmBackend> weak_shm = shm_;
    std::weak_ptr<shm::ShmGroup> weak_engine = engine_shm_;
    abort_.on_abort([weak_shm, weak_engine](const std::string& reason) {
      if (auto b = weak_shm.lock()) b->abort(reason);
      if (auto g = weak_engine.lock()) g->abort(reason);
    });
  }
  // Hierarchical allreduce needs every host to hold the same number of ranks (the slices of
  // local rank i meet in cross group i); all ranks agree on it through one Gloo allreduce.
  if (world_.size > world_.local_size && world_.hierarchical_allreduce != 0) {
    std::int32_t able = shm_ && world_.local_size * world_.cross_size == world_.size ? 1 : 0;
    try {
      gloo_->allreduce(&able, 1, DataType::kInt32, ReduceOp::kMin, gloo::Group::kGlobal);
    } catch (...) {
      client_.reset();
      rethrow_translated(world_, "init(): agreeing on hierarchical allreduce", abort_, start_hint);
    }
    hierarchical_ = able == 1;
    if (!hierarchical_ && world_.hierarchical_allreduce == 1) {
      log().warn(
          "{}: HORA_HIERARCHICAL_ALLREDUCE=1 ignored: it needs shared memory (HORA_SHM=1) "
          "and the same number of ranks on every host",
          who(world_));
    }
  }
  log().debug("{}: shared memory between the {} local ranks: {}", who(world_), world_.local_size,
              shm_ ? (shm_->serves(Scope::kGlobal) ? "local and global scope" : "local scope")
                   : "off");
}

Runtime::~Runtime() {
  try {
    shutdown();
  } catch (const std::exception& e) {
    // A destructor must not throw; the job is ending anyway.
    log().warn("{}: shutdown: {}", who(world_), e.what());
  }
}

Runtime::Backends Runtime::take_backends() {
  std::lock_guard<std::mutex> lock(backends_mutex_);
  return {std::move(gloo_), std::move(nccl_), std::move(shm_), std::move(engine_shm_)};
}

void Runtime::goodbye_at_exit() {
  if (closed_.load() || !client_ || abort_.reason()) return;
  try {
    client_->goodbye(/*at_exit=*/true);
  } catch (const std::exception& e) {
    log().info("{}: goodbye to the rendezvous failed: {}", who(world_), e.what());
  }
}

void Runtime::shutdown() {
  if (closed_.exchange(true)) return;
  clear_peer_loss_sink(peer_loss_token_);  // before client_ goes
  auto [gloo, gpu, shm, engine_shm] = take_backends();
  // NCCL communicators go first: they may still need the rendezvous connection to finish.
  if (gpu) gpu->close();
  gpu.reset();
  if (client_) {
    try {
      if (!abort_.reason()) client_->goodbye();
    } catch (const std::exception& e) {
      // The launcher may already be gone (it aborted the job, or was killed); there is nobody
      // left to tell, and the rank is leaving either way.
      log().info("{}: goodbye to the rendezvous failed: {}", who(world_), e.what());
    }
    client_.reset();
  }
  // Destroyed here unless a collective on another thread still holds it (then when it returns).
  if (shm) shm->close();
  shm.reset();
  engine_shm.reset();
  if (gloo) gloo->close();
  gloo.reset();
}

void Runtime::close_abruptly() {
  if (closed_.exchange(true)) return;
  clear_peer_loss_sink(peer_loss_token_);
  auto [gloo, gpu, shm, engine_shm] = take_backends();
  if (gloo) gloo->close_all("hora: this rank closed its connections abruptly");
  if (shm) shm->close_abruptly();
  if (engine_shm) engine_shm->close_abruptly();
  gpu.reset();
  shm.reset();
  engine_shm.reset();
  client_.reset();
  gloo.reset();
}

void Runtime::abort(const std::string& reason, bool announce) {
  // The rendezvous client calls this once; the check only keeps a second caller quiet.
  if (abort_.reason()) return;
  if (!announce) {
    abort_.abort(reason);
    return;
  }
  // One line, the same on every rank, so the launcher's interleaved output stays readable.
  // Printed before collectives are woken, so it precedes whatever the program prints about
  // the AbortedError it then catches.
  std::fprintf(stderr, "hora: rank %d: job aborted by launcher: %s\n", world_.rank, reason.c_str());
  std::fflush(stderr);
  abort_.abort(reason);  // the Gloo contexts registered with abort_ when the mesh was built
  std::shared_ptr<nccl::Backend> gpu;
  {
    std::lock_guard<std::mutex> lock(backends_mutex_);
    gpu = nccl_;
  }
  if (gpu) gpu->abort(reason);
}

std::unique_ptr<engine::Transport> Runtime::make_engine_transport() {
  std::shared_ptr<gloo::GlooBackend> gloo;
  std::shared_ptr<shm::ShmGroup> engine_shm;
  {
    std::lock_guard<std::mutex> lock(backends_mutex_);
    gloo = gloo_;
    engine_shm = engine_shm_;
  }
  if (engine_shm) return std::make_unique<shm::EngineTransport>(std::move(engine_shm));
  return std::make_unique<gloo::EngineTransport>(world_, gloo.get());
}

int Runtime::rank(Scope scope) const {
  switch (scope) {
    case Scope::kGlobal: return world_.rank;
    case Scope::kLocal: return world_.local_rank;
    case Scope::kCross: return world_.cross_rank;
  }
  return -1;
}

int Runtime::size(Scope scope) const {
  switch (scope) {
    case Scope::kGlobal: return world_.size;
    case Scope::kLocal: return world_.local_size;
    case Scope::kCross: return world_.cross_size;
  }
  return 0;
}

void Runtime::throw_closed(const char* what) const {
  throw UsageError(fmt::format("{}: hora::{} called after hora::shutdown()", who(world_), what),
                   world_.rank, world_.hostname);
}

std::shared_ptr<gloo::GlooBackend> Runtime::gloo_backend(const char* what) const {
  std::lock_guard<std::mutex> lock(backends_mutex_);
  if (!gloo_) throw_closed(what);
  return gloo_;
}

std::shared_ptr<nccl::Backend> Runtime::gpu_backend(const char* what) const {
  std::lock_guard<std::mutex> lock(backends_mutex_);
  if (!nccl_) throw_closed(what);
  return nccl_;
}

int Runtime::enter(const char* what, Scope scope) {
  if (closed_) throw_closed(what);
  if (auto reason = abort_.reason()) {
    throw AbortedError(aborted_message(world_, what, *reason), world_.rank, world_.hostname);
  }
  const int n = size(scope);
  if (n <= 0) {
    throw UsageError(fmt::format("{}: hora::{}: scope {} is not a hora::Scope (kGlobal, kLocal "
                                 "or kCross)",
                                 who(world_), what, static_cast<int>(scope)),
                     world_.rank, world_.hostname);
  }
  return n;
}

void Runtime::check_type(const char* what, DataType type) const {
  if (size_of(type) == 0) {
    throw UsageError(fmt::format("{}: hora::{}: type {} is not a hora::DataType", who(world_), what,
                                 static_cast<int>(type)),
                     world_.rank, world_.hostname);
  }
}

void Runtime::check_op(const char* what, ReduceOp op) const {
  if (std::string(name_of(op)) == "unknown") {
    throw UsageError(fmt::format("{}: hora::{}: op {} is not a hora::ReduceOp", who(world_), what,
                                 static_cast<int>(op)),
                     world_.rank, world_.hostname);
  }
}

namespace {

void check_buffer(const WorldInfo& world, const char* what, const char* name, const void* buffer,
                  std::size_t count) {
  if (buffer == nullptr && count > 0) {
    throw UsageError(fmt::format("{}: hora::{}: {} is null but {} elements are to be accessed",
                                 who(world), what, name, count),
                     world.rank, world.hostname);
  }
}

void check_length(const WorldInfo& world, const char* what, const char* name, std::size_t length,
                  int n, Scope scope) {
  if (length != static_cast<std::size_t>(n)) {
    throw UsageError(fmt::format("{}: hora::{}: {} has {} entries but the {} group has {} ranks "
                                 "({}[i] is for rank i of the group)",
                                 who(world), what, name, length, name_of(scope), n, name),
                     world.rank, world.hostname);
  }
}

// A scope of one rank: the op is a copy of this rank's data (the average of one value is
// itself).
void copy_alone(const void* sendbuf, void* recvbuf, std::size_t bytes) {
  if (bytes > 0 && sendbuf != recvbuf) std::memmove(recvbuf, sendbuf, bytes);
}

}  // namespace

void Runtime::allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType type,
                        ReduceOp op, Scope scope, StreamArg stream) {
  const Plan p =
      plan({"allreduce", scope, {{"sendbuf", sendbuf}, {"recvbuf", recvbuf}}, stream, count});
  if (p.path == Path::kGpu) {
    return p.backend->allreduce(sendbuf, recvbuf, count, type, op, scope, stream.value_or(nullptr));
  }
  check_type("allreduce", type);
  check_op("allreduce", op);
  check_buffer(world_, "allreduce", "sendbuf", sendbuf, count);
  check_buffer(world_, "allreduce", "recvbuf", recvbuf, count);
  switch (p.path) {
    case Path::kAlone: return copy_alone(sendbuf, recvbuf, count * size_of(type));
    case Path::kHierarchical:
      copy_alone(sendbuf, recvbuf, count * size_of(type));
      allreduce_hierarchical(recvbuf, count, type, op);
      if (op == ReduceOp::kAverage) divide(recvbuf, count, type, p.size);
      return;
    default:
      // count 0 still goes to the backend: its cross-rank check must see it, or a rank passing
      // 0 while the others pass N would leave them waiting for it until their timeout.
      return p.backend->allreduce(sendbuf, recvbuf, count, type, op, scope, nullptr);
  }
}

void Runtime::allreduce_hierarchical(void* buffer, std::size_t count, DataType type, ReduceOp op) {
  std::shared_ptr<gloo::GlooBackend> gloo;
  std::shared_ptr<shm::ShmBackend> shm;
  {
    std::lock_guard<std::mutex> lock(backends_mutex_);
    if (!gloo_ || !shm_) throw_closed("allreduce");
    gloo = gloo_;
    shm = shm_;
  }
  hierarchical_allreduce(shm->group(), *gloo, world_.cross_size, buffer, count, type, op);
}

void Runtime::allgather(const void* sendbuf, std::size_t count, void* recvbuf,
                        const std::vector<std::size_t>& counts, DataType type, Scope scope,
                        StreamArg stream) {
  const Plan p = plan({"allgather", scope, {{"sendbuf", sendbuf}, {"recvbuf", recvbuf}}, stream});
  if (p.path == Path::kGpu) {
    return p.backend->allgather(sendbuf, count, recvbuf, counts, type, scope,
                                stream.value_or(nullptr));
  }
  check_type("allgather", type);
  check_length(world_, "allgather", "counts", counts.size(), p.size, scope);
  const int me = rank(scope);
  if (counts[me] != count) {
    throw UsageError(fmt::format("{}: hora::allgather: counts[{}] = {} but this rank (rank {} of "
                                 "the {} group) passes count = {}; use allgather_counts() to build "
                                 "counts",
                                 who(world_), me, counts[me], me, name_of(scope), count),
                     world_.rank, world_.hostname);
  }
  const std::size_t total = sum(world_, "allgather", "counts", counts);
  check_buffer(world_, "allgather", "sendbuf", sendbuf, count);
  check_buffer(world_, "allgather", "recvbuf", recvbuf, total);
  if (total == 0) return;
  if (p.path == Path::kAlone) return copy_alone(sendbuf, recvbuf, count * size_of(type));
  p.backend->allgather(sendbuf, count, recvbuf, counts, type, scope, nullptr);
}

std::vector<std::size_t> Runtime::allgather_counts(std::size_t count, Scope scope) {
  const int n = enter("allgather_counts", scope);
  if (n == 1) return {count};
  return gloo_backend("allgather_counts")->allgather_counts(count, gloo::group_of(scope));
}

void Runtime::broadcast(void* buffer, std::size_t count, DataType type, int root, Scope scope,
                        StreamArg stream) {
  const Plan p = plan({"broadcast", scope, {{"buffer", buffer}}, stream});
  if (p.path == Path::kGpu) {
    return p.backend->broadcast(buffer, count, type, root, scope, stream.value_or(nullptr));
  }
  check_type("broadcast", type);
  if (root < 0 || root >= p.size) {
    throw UsageError(fmt::format("{}: hora::broadcast: root {} is not a rank of the {} group "
                                 "(0..{})",
                                 who(world_), root, name_of(scope), p.size - 1),
                     world_.rank, world_.hostname);
  }
  check_buffer(world_, "broadcast", "buffer", buffer, count);
  if (p.path == Path::kAlone) return;  // count 0 still goes to the backend's check (allreduce)
  p.backend->broadcast(buffer, count, type, root, scope, nullptr);
}

void Runtime::alltoall(const void* sendbuf, const std::vector<std::size_t>& send_splits,
                       void* recvbuf, const std::vector<std::size_t>& recv_splits, DataType type,
                       Scope scope, StreamArg stream) {
  const Plan p = plan({"alltoall", scope, {{"sendbuf", sendbuf}, {"recvbuf", recvbuf}}, stream});
  if (p.path == Path::kGpu) {
    return p.backend->alltoall(sendbuf, send_splits, recvbuf, recv_splits, type, scope,
                               stream.value_or(nullptr));
  }
  check_type("alltoall", type);
  check_length(world_, "alltoall", "send_splits", send_splits.size(), p.size, scope);
  check_length(world_, "alltoall", "recv_splits", recv_splits.size(), p.size, scope);
  const int me = rank(scope);
  if (send_splits[me] != recv_splits[me]) {
    throw UsageError(fmt::format("{}: hora::alltoall: send_splits[{}] = {} but recv_splits[{}] = "
                                 "{}: what this rank sends itself must equal what it receives "
                                 "from itself; use alltoall_splits() to build recv_splits",
                                 who(world_), me, send_splits[me], me, recv_splits[me]),
                     world_.rank, world_.hostname);
  }
  const std::size_t sent = sum(world_, "alltoall", "send_splits", send_splits);
  const std::size_t received = sum(world_, "alltoall", "recv_splits", recv_splits);
  check_buffer(world_, "alltoall", "sendbuf", sendbuf, sent);
  check_buffer(world_, "alltoall", "recvbuf", recvbuf, received);
  if (p.path == Path::kAlone) return copy_alone(sendbuf, recvbuf, sent * size_of(type));
  p.backend->alltoall(sendbuf, send_splits, recvbuf, recv_splits, type, scope, nullptr);
}

std::vector<std::size_t> Runtime::alltoall_splits(const std::vector<std::size_t>& send_splits,
                                                  Scope scope) {
  const int n = enter("alltoall_splits", scope);
  check_length(world_, "alltoall_splits", "send_splits", send_splits.size(), n, scope);
  if (n == 1) return send_splits;
  return gloo_backend("alltoall_splits")->alltoall_splits(send_splits, gloo::group_of(scope));
}

void Runtime::reducescatter(const void* sendbuf, std::size_t count, void* recvbuf, DataType type,
                            ReduceOp op, Scope scope, StreamArg stream) {
  const Plan p =
      plan({"reducescatter", scope, {{"sendbuf", sendbuf}, {"recvbuf", recvbuf}}, stream});
  if (p.path == Path::kGpu) {
    return p.backend->reducescatter(sendbuf, count, recvbuf, type, op, scope,
                                    stream.value_or(nullptr));
  }
  check_type("reducescatter", type);
  check_op("reducescatter", op);
  const int me = rank(scope);
  const std::vector<std::size_t> blocks = block_counts(count, p.size);
  check_buffer(world_, "reducescatter", "sendbuf", sendbuf, count);
  check_buffer(world_, "reducescatter", "recvbuf", recvbuf, blocks[me]);
  if (p.path == Path::kAlone) return copy_alone(sendbuf, recvbuf, count * size_of(type));
  // count 0 still goes to the backend's check (see allreduce)
  p.backend->reducescatter(sendbuf, count, recvbuf, type, op, scope, nullptr);
}

void Runtime::barrier(Scope scope, StreamArg stream) {
  if (stream) {
    // <hora/cuda.h>'s barrier has no buffers: with a GPU it is NCCL's, on the stream.
    if (nccl::gpu_available()) return gpu_backend("barrier")->barrier(scope, *stream);
    settle("barrier", *stream);
  }
  const Plan p = plan({"barrier", scope, {}, std::nullopt});
  if (p.path == Path::kAlone) return;
  p.backend->barrier(scope, nullptr);
}

int Runtime::cuda_device() { return gpu_backend("cuda_device()")->device(); }

// --- Routing. ---

Runtime::Plan Runtime::plan(const Op& op) {
  if (auto gpu = route(op.what, op.buffers, op.stream)) return {Path::kGpu, 0, std::move(gpu)};
  const int n = enter(op.what, op.scope);
  if (n == 1) return {Path::kAlone, n, nullptr};
  if (op.scope == Scope::kGlobal && hierarchical_ && op.hierarchical_count > 0) {
    return {Path::kHierarchical, n, nullptr};
  }
  std::lock_guard<std::mutex> lock(backends_mutex_);
  if (!gloo_) throw_closed(op.what);  // shutdown() ran since enter()
  if (shm_ && shm_->serves(op.scope)) return {Path::kShm, n, shm_};
  return {Path::kGloo, n, gloo_};
}

std::shared_ptr<Backend> Runtime::route(const char* what, std::initializer_list<Buffer> buffers,
                                        StreamArg stream) {
  if (world_.set_id != 0) {
    // Process sets run on host memory only (they have no NCCL communicators).
    if (!stream && !nccl::gpu_available()) return nullptr;
    for (const Buffer& b : buffers) {
      if (stream || (b.ptr != nullptr && nccl::is_device_pointer(b.ptr))) {
        throw UsageError(fmt::format("{}: hora::{} on process set {}: {} is GPU memory (or a "
                                     "stream was given); process sets run on host memory: copy "
                                     "the buffers to the host, or use the global set",
                                     who(world_), what, world_.set_id, b.name),
                         world_.rank, world_.hostname);
      }
    }
    return nullptr;
  }
  if (!stream) {
    // The host API: GPU buffers go to NCCL on the default stream. Without NCCL or a GPU this
    // costs one cached check.
    if (!nccl::gpu_available()) return nullptr;
    bool any_on_device = false;
    for (const Buffer& b : buffers) {
      if (b.ptr != nullptr && nccl::is_device_pointer(b.ptr)) any_on_device = true;
    }
    if (!any_on_device) return nullptr;
  }
  if (on_device(what, buffers)) {
    if (closed_) throw_closed(what);
    return gpu_backend(what);
  }
  settle(what, stream.value_or(nullptr));
  return nullptr;
}

namespace {
// "rank 2 of 4 on server1": how <hora/cuda.h>'s routing errors have always named the rank.
std::string who_of(const WorldInfo& world) {
  return rank_name(world.rank, world.size, world.hostname);
}
}  // namespace

bool Runtime::on_device(const char* what, std::initializer_list<Buffer> buffers) {
  const Buffer* device_buffer = nullptr;
  const Buffer* host_buffer = nullptr;
  nccl::PointerInfo device_info;
  for (const Buffer& b : buffers) {
    if (b.ptr == nullptr) continue;  // null buffers (count 0) do not vote
    nccl::PointerInfo info = nccl::pointer_info(b.ptr);
    if (info.on_device) {
      if (device_buffer == nullptr) device_info = info;
      device_buffer = &b;
    } else {
      host_buffer = &b;
    }
  }
  if (device_buffer != nullptr && host_buffer != nullptr) {
    throw UsageError(fmt::format("{}: {}: {} is GPU memory but {} is host memory; pass both "
                                 "on this rank's GPU (NCCL) or both in host memory (Gloo)",
                                 who_of(world_), what, device_buffer->name, host_buffer->name),
                     world_.rank, world_.hostname);
  }
  if (device_buffer == nullptr) return false;
  if (!device_info.managed) {
    const int mine = cuda_device();
    if (device_info.device != mine) {
      throw UsageError(fmt::format("{}: {}: {} is memory of GPU {}, but this rank uses GPU {} "
                                   "(local rank, or HORA_CUDA_DEVICE); allocate it after "
                                   "cudaSetDevice(hora::cuda_device())",
                                   who_of(world_), what, device_buffer->name, device_info.device,
                                   mine),
                       world_.rank, world_.hostname);
    }
  }
  return true;
}

void Runtime::settle(const char* what, void* stream) {
  if (stream == nullptr) return;
  if (!nccl::gpu_available()) {
    throw UsageError(fmt::format("{}: {}: a CUDA stream was given but no GPU is visible to "
                                 "this rank; pass nullptr",
                                 who_of(world_), what),
                     world_.rank, world_.hostname);
  }
  // Cannot hang on a peer: the stream holds only this process's work.
  const std::string error = nccl::synchronize_stream(stream);
  if (!error.empty()) {
    throw Error(fmt::format("{}: {}: synchronizing the stream before the host collective "
                            "failed: {}",
                            who_of(world_), what, error),
                world_.rank, world_.hostname);
  }
}

}  // namespace hora::detail
