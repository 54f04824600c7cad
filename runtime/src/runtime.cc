#include "runtime/src/runtime.h"

#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <numeric>

#include <fmt/format.h>
#include <hora/error.h>
#include <hora/hora.h>

#include "rendezvous/client.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/engine_options.h"
#include "runtime/engine/global_engine.h"
#include "runtime/gloo/engine_transport.h"
#include "runtime/gloo/gloo_backend.h"
#include "runtime/gloo/mesh.h"
#include "runtime/nccl/backend.h"
#include "runtime/shm/segment.h"
#include "runtime/shm/shm_group.h"
#include "runtime/src/error_translation.h"
#include "runtime/src/log.h"
#include "runtime/src/reduce.h"

namespace hora::detail {
namespace {

using Clock = std::chrono::steady_clock;

std::size_t sum(const std::vector<std::size_t>& v) {
  return std::accumulate(v.begin(), v.end(), std::size_t{0});
}

// The host's shared-memory group: local rank 0 names the segment and publishes the name through
// the rendezvous, then creates it; the others read the name and open it (docs/shm.md).
std::shared_ptr<shm::ShmGroup> form_shm_group(const WorldInfo& world, rdv::Client& client,
                                              Clock::time_point deadline, const char* purpose) {
  const std::string key = fmt::format("hora/shm/{}/{}", world.host_index, purpose);
  auto left = [&] {
    return std::max(std::chrono::milliseconds(1),
                    std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
  };
  std::string name;
  if (world.local_rank == 0) {
    name = shm::Segment::make_name(world.secret.data(), world.secret.size(), world.host_index);
    client.set(key, rdv::Bytes(name.begin(), name.end()), left());
  } else {
    const rdv::Bytes bytes = client.get(key, left());
    name.assign(bytes.begin(), bytes.end());
  }
  shm::ShmOptions options;
  options.local_rank = world.local_rank;
  options.local_size = world.local_size;
  options.global_rank = world.rank;
  options.host = world.hostname;
  options.timeout = world.timeout;
  return std::make_shared<shm::ShmGroup>(name, options, deadline);
}

}  // namespace

Runtime::Runtime(WorldInfo world) : world_(std::move(world)) {
  if (!world_.launched()) {
    log().debug("{}: no HORA_RANK: running as a world of one", who(world_));
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
  client_->set_abort_handler([this](const std::string& reason) { abort(reason); });

  try {
    gloo_ = std::make_unique<GlooBackend>(world_, build_mesh(world_, *client_, abort_, deadline),
                                          abort_);
  } catch (...) {
    // Leave without a goodbye: the launcher must see this rank fail, not finish.
    client_.reset();
    rethrow_translated(world_, "init(): forming the Gloo communicators", abort_, start_hint);
  }
  if (world_.shm && world_.local_size > 1) {
    try {
      shm_ = form_shm_group(world_, *client_, deadline, "user");
      // The global scope is this group when every rank is here (local rank i is rank i then).
      // The async engine then gets a group of its own, for its own thread.
      shm_global_ = world_.local_size == world_.size;
      for (int i = 0; shm_global_ && i < shm_->size(); ++i) {
        shm_global_ = shm_->global_rank_of(i) == i;
      }
      if (shm_global_) engine_shm_ = form_shm_group(world_, *client_, deadline, "engine");
    } catch (...) {
      client_.reset();
      rethrow_translated(world_, "init(): forming the shared-memory group of this host", abort_,
                         start_hint + ", or set HORA_SHM=0");
    }
    for (const auto& group : {shm_, engine_shm_}) {
      if (!group) continue;
      std::weak_ptr<shm::ShmGroup> weak = group;
      abort_.on_abort([weak](const std::string& reason) {
        if (auto g = weak.lock()) g->abort(reason);
      });
    }
  }
  // Hierarchical allreduce needs every host to hold the same number of ranks (the slices of
  // local rank i meet in cross group i); all ranks agree on it through one Gloo allreduce.
  if (world_.size > world_.local_size && world_.hierarchical_allreduce != 0) {
    std::int32_t able = shm_ && world_.local_size * world_.cross_size == world_.size ? 1 : 0;
    try {
      gloo_->allreduce(&able, 1, DataType::kInt32, ReduceOp::kMin, Group::kGlobal);
    } catch (...) {
      client_.reset();
      rethrow_translated(world_, "init(): agreeing on hierarchical allreduce", abort_, start_hint);
    }
    hierarchical_ = able == 1;
    if (!hierarchical_ && world_.hierarchical_allreduce == 1) {
      log().warn("{}: HORA_HIERARCHICAL_ALLREDUCE=1 ignored: it needs shared memory (HORA_SHM=1) "
                 "and the same number of ranks on every host",
                 who(world_));
    }
  }
  log().debug("{}: shared memory between the {} local ranks: {}", who(world_), world_.local_size,
              shm_ ? (shm_global_ ? "local and global scope" : "local scope") : "off");
  log().debug("{}: joined the job ({} ranks) through {}:{}", who(world_), world_.size,
              world_.rendezvous_host, world_.rendezvous_port);
}

Runtime::~Runtime() {
  try {
    shutdown();
  } catch (const std::exception& e) {
    // A destructor must not throw; the job is ending anyway.
    log().warn("{}: shutdown: {}", who(world_), e.what());
  }
}

void Runtime::shutdown() {
  if (closed_) return;
  closed_ = true;
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
  shm_.reset();
  engine_shm_.reset();
  gloo_.reset();
}

void Runtime::close_abruptly() {
  if (closed_) return;
  closed_ = true;
  if (gloo_) gloo_->close_all("hora: this rank closed its connections abruptly");
  if (shm_) shm_->close_abruptly();
  if (engine_shm_) engine_shm_->close_abruptly();
  client_.reset();
  shm_.reset();
  engine_shm_.reset();
  gloo_.reset();
}

void Runtime::abort(const std::string& reason) {
  // The rendezvous client calls this once; the check only keeps a second caller quiet.
  if (abort_.reason()) return;
  // One line, the same on every rank, so the launcher's interleaved output stays readable.
  // Printed before collectives are woken, so it precedes whatever the program prints about
  // the AbortedError it then catches.
  std::fprintf(stderr, "hora: rank %d: job aborted by launcher: %s\n", world_.rank, reason.c_str());
  std::fflush(stderr);
  abort_.abort(reason);
}

std::unique_ptr<engine::Transport> Runtime::make_engine_transport() {
  return std::make_unique<EngineTransport>(world_, gloo_.get(), engine_shm_.get());
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

int Runtime::enter(const char* what, Scope scope) {
  if (closed_) {
    throw UsageError(fmt::format("{}: hora::{} called after hora::shutdown()", who(world_), what),
                     world_.rank, world_.hostname);
  }
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

shm::ShmGroup* Runtime::shm_for(Scope scope) const {
  if (scope == Scope::kLocal || (scope == Scope::kGlobal && shm_global_)) return shm_.get();
  return nullptr;
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

}  // namespace

void Runtime::allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType type,
                        ReduceOp op, Scope scope) {
  const int n = enter("allreduce", scope);
  check_type("allreduce", type);
  check_op("allreduce", op);
  check_buffer(world_, "allreduce", "sendbuf", sendbuf, count);
  check_buffer(world_, "allreduce", "recvbuf", recvbuf, count);
  if (count == 0) return;
  if (sendbuf != recvbuf) std::memmove(recvbuf, sendbuf, count * size_of(type));
  if (n == 1) return;  // the average of one value is itself
  if (auto* g = shm_for(scope)) {
    g->allreduce(recvbuf, count, type, op, name_of(scope));
  } else if (scope == Scope::kGlobal && hierarchical_) {
    hierarchical_allreduce(recvbuf, count, type, op);
  } else {
    gloo_->allreduce(recvbuf, count, type, op, group_of(scope));
  }
  if (op == ReduceOp::kAverage) divide(recvbuf, count, type, n);
}

void Runtime::hierarchical_allreduce(void* buffer, std::size_t count, DataType type,
                                     ReduceOp op) {
  const int local = world_.local_size;
  const int me = world_.local_rank;
  std::vector<std::size_t> blocks(static_cast<std::size_t>(local));
  std::size_t offset = 0;
  for (int i = 0; i < local; ++i) {
    blocks[i] = reducescatter_count(count, i, local);
    if (i < me) offset += blocks[i];
  }
  char* slice = static_cast<char*>(buffer) + offset * size_of(type);
  shm_->reducescatter(buffer, slice, blocks, type, op, "global");
  if (blocks[me] > 0 && world_.cross_size > 1) {
    gloo_->allreduce(slice, blocks[me], type, op, Group::kCross);
  }
  shm_->allgather(slice, blocks[me], buffer, blocks, type, "global");
}

void Runtime::allgather(const void* sendbuf, std::size_t count, void* recvbuf,
                        const std::vector<std::size_t>& counts, DataType type, Scope scope) {
  const int n = enter("allgather", scope);
  check_type("allgather", type);
  check_length(world_, "allgather", "counts", counts.size(), n, scope);
  const int me = rank(scope);
  if (counts[me] != count) {
    throw UsageError(fmt::format("{}: hora::allgather: counts[{}] = {} but this rank (rank {} of "
                                 "the {} group) passes count = {}; use allgather_counts() to build "
                                 "counts",
                                 who(world_), me, counts[me], me, name_of(scope), count),
                     world_.rank, world_.hostname);
  }
  const std::size_t total = sum(counts);
  check_buffer(world_, "allgather", "sendbuf", sendbuf, count);
  check_buffer(world_, "allgather", "recvbuf", recvbuf, total);
  if (total == 0) return;
  if (n == 1) {
    if (count > 0 && sendbuf != recvbuf) std::memmove(recvbuf, sendbuf, count * size_of(type));
    return;
  }
  if (auto* g = shm_for(scope)) return g->allgather(sendbuf, count, recvbuf, counts, type, name_of(scope));
  gloo_->allgather(sendbuf, count, recvbuf, counts, type, group_of(scope));
}

std::vector<std::size_t> Runtime::allgather_counts(std::size_t count, Scope scope) {
  const int n = enter("allgather_counts", scope);
  if (n == 1) return {count};
  if (auto* g = shm_for(scope)) {
    const std::uint64_t mine = count;
    std::vector<std::uint64_t> all(static_cast<std::size_t>(n));
    g->allgather(&mine, 1, all.data(), std::vector<std::size_t>(all.size(), 1), DataType::kInt64,
                 name_of(scope));
    return std::vector<std::size_t>(all.begin(), all.end());
  }
  return gloo_->allgather_counts(count, group_of(scope));
}

void Runtime::broadcast(void* buffer, std::size_t count, DataType type, int root, Scope scope) {
  const int n = enter("broadcast", scope);
  check_type("broadcast", type);
  if (root < 0 || root >= n) {
    throw UsageError(fmt::format("{}: hora::broadcast: root {} is not a rank of the {} group "
                                 "(0..{})",
                                 who(world_), root, name_of(scope), n - 1),
                     world_.rank, world_.hostname);
  }
  check_buffer(world_, "broadcast", "buffer", buffer, count);
  if (count == 0 || n == 1) return;
  if (auto* g = shm_for(scope)) return g->broadcast(buffer, count, type, root, name_of(scope));
  gloo_->broadcast(buffer, count, type, root, group_of(scope));
}

void Runtime::alltoall(const void* sendbuf, const std::vector<std::size_t>& send_splits,
                       void* recvbuf, const std::vector<std::size_t>& recv_splits, DataType type,
                       Scope scope) {
  const int n = enter("alltoall", scope);
  check_type("alltoall", type);
  check_length(world_, "alltoall", "send_splits", send_splits.size(), n, scope);
  check_length(world_, "alltoall", "recv_splits", recv_splits.size(), n, scope);
  const int me = rank(scope);
  if (send_splits[me] != recv_splits[me]) {
    throw UsageError(fmt::format("{}: hora::alltoall: send_splits[{}] = {} but recv_splits[{}] = "
                                 "{}: what this rank sends itself must equal what it receives "
                                 "from itself; use alltoall_splits() to build recv_splits",
                                 who(world_), me, send_splits[me], me, recv_splits[me]),
                     world_.rank, world_.hostname);
  }
  const std::size_t sent = sum(send_splits);
  const std::size_t received = sum(recv_splits);
  check_buffer(world_, "alltoall", "sendbuf", sendbuf, sent);
  check_buffer(world_, "alltoall", "recvbuf", recvbuf, received);
  if (n == 1) {
    if (sent > 0 && sendbuf != recvbuf) std::memmove(recvbuf, sendbuf, sent * size_of(type));
    return;
  }
  if (auto* g = shm_for(scope)) {
    return g->alltoall(sendbuf, send_splits, recvbuf, recv_splits, type, name_of(scope));
  }
  gloo_->alltoall(sendbuf, send_splits, recvbuf, recv_splits, type, group_of(scope));
}

std::vector<std::size_t> Runtime::alltoall_splits(const std::vector<std::size_t>& send_splits,
                                                  Scope scope) {
  const int n = enter("alltoall_splits", scope);
  check_length(world_, "alltoall_splits", "send_splits", send_splits.size(), n, scope);
  if (n == 1) return send_splits;
  if (auto* g = shm_for(scope)) {
    const std::vector<std::uint64_t> mine(send_splits.begin(), send_splits.end());
    std::vector<std::uint64_t> theirs(mine.size());
    const std::vector<std::size_t> ones(mine.size(), 1);
    g->alltoall(mine.data(), ones, theirs.data(), ones, DataType::kInt64, name_of(scope));
    return std::vector<std::size_t>(theirs.begin(), theirs.end());
  }
  return gloo_->alltoall_splits(send_splits, group_of(scope));
}

void Runtime::reducescatter(const void* sendbuf, std::size_t count, void* recvbuf, DataType type,
                            ReduceOp op, Scope scope) {
  const int n = enter("reducescatter", scope);
  check_type("reducescatter", type);
  check_op("reducescatter", op);
  const int me = rank(scope);
  std::vector<std::size_t> blocks(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) blocks[i] = reducescatter_count(count, i, n);
  check_buffer(world_, "reducescatter", "sendbuf", sendbuf, count);
  check_buffer(world_, "reducescatter", "recvbuf", recvbuf, blocks[me]);
  if (count == 0) return;
  if (n == 1) {
    if (sendbuf != recvbuf) std::memmove(recvbuf, sendbuf, count * size_of(type));
    return;
  }
  if (auto* g = shm_for(scope)) {
    g->reducescatter(sendbuf, recvbuf, blocks, type, op, name_of(scope));
  } else {
    gloo_->reducescatter(sendbuf, recvbuf, blocks, type, op, group_of(scope));
  }
  if (op == ReduceOp::kAverage) divide(recvbuf, blocks[me], type, n);
}

void Runtime::barrier(Scope scope) {
  const int n = enter("barrier", scope);
  if (n == 1) return;
  if (auto* g = shm_for(scope)) return g->barrier(name_of(scope));
  gloo_->barrier(group_of(scope));
}

// --- The process's runtime. ---

namespace {

// Owned here, created by init() and destroyed by shutdown() or at exit. Never a static object:
// its destructor must not run during static destruction, after other libraries' state is gone.
std::mutex g_mutex;
Runtime* g_runtime = nullptr;
bool g_atexit_registered = false;
// The async engine (<hora/async.h>) of this process and its transport; guarded by g_mutex.
// Submitting threads reach the engine through engine::installed_engine(), not these.
std::shared_ptr<engine::Engine> g_engine;
std::unique_ptr<engine::Transport> g_engine_transport;

// Uninstalls and stops the engine. Stopping waits for the engine thread's last cycle, which
// may need the other ranks (bounded by their timeout), so it runs without g_mutex held.
void stop_engine(std::shared_ptr<engine::Engine> engine,
                 std::unique_ptr<engine::Transport> transport) {
  engine::install_engine(nullptr);
  if (engine) engine->shutdown();
  engine.reset();
  transport.reset();  // after the engine: it calls the transport until shutdown() returns
}

void shutdown_at_exit() {
  // A program that returns from main() without hora::shutdown() still leaves cleanly: the
  // launcher sees a goodbye, not a dropped connection.
  try {
    process_shutdown();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hora: shutdown at exit failed: %s\n", e.what());
  }
}

}  // namespace

namespace {
// Gloo writes to peer sockets without MSG_NOSIGNAL: a peer that dies mid-collective would kill
// this rank with SIGPIPE instead of letting the write fail and the collective raise PeerFailure
// naming the peer. Ignore SIGPIPE, but only when the program left it at the default: a program
// that installed its own handler keeps it.
void ignore_sigpipe_if_default() {
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGPIPE, &ignore, nullptr);
  }
}
}  // namespace

void process_init() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_runtime != nullptr) return;
  ignore_sigpipe_if_default();
  WorldInfo world = world_from_environment();
  auto runtime = std::make_unique<Runtime>(std::move(world));
  // The GPU backend forms its NCCL communicators lazily through the same rendezvous
  // connection, and aborts them when the launcher aborts the job.
  nccl::attach(runtime->world(), runtime->client(), runtime->world().timeout);
  runtime->on_abort([](const std::string& reason) { nccl::abort_all(reason); });

  // The async engine: its thread cycles with every other rank's from now on (the first cycle
  // waits for all of them), on the Gloo context reserved for it.
  std::unique_ptr<engine::Transport> transport;
  std::shared_ptr<engine::Engine> eng;
  try {
    transport = runtime->make_engine_transport();
    auto options = engine::EngineOptions::from_environment();
    options.hostname = runtime->world().hostname;
    eng = std::make_shared<engine::Engine>(*transport, std::move(options));
    eng->start();
  } catch (...) {
    eng.reset();
    transport.reset();
    nccl::detach();
    throw;  // `runtime` leaves the job on the way out
  }
  engine::install_engine(eng);
  g_engine = std::move(eng);
  g_engine_transport = std::move(transport);
  g_runtime = runtime.release();
  if (!g_atexit_registered) {
    g_atexit_registered = true;
    std::atexit(shutdown_at_exit);
  }
}

void process_shutdown() {
  Runtime* runtime = nullptr;
  std::shared_ptr<engine::Engine> engine;
  std::unique_ptr<engine::Transport> transport;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    runtime = g_runtime;
    g_runtime = nullptr;
    engine = std::move(g_engine);
    transport = std::move(g_engine_transport);
  }
  if (runtime == nullptr) return;
  stop_engine(std::move(engine), std::move(transport));
  // NCCL communicators go first: they may still need the rendezvous connection to finish.
  nccl::detach();
  try {
    runtime->shutdown();
  } catch (...) {
    delete runtime;
    throw;
  }
  delete runtime;
}

bool process_initialized() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_runtime != nullptr;
}

Runtime& process_runtime(const char* what) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_runtime == nullptr) {
    throw UsageError(fmt::format("hora::{} called before hora::init()", what));
  }
  return *g_runtime;
}

}  // namespace hora::detail
