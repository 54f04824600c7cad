#include "runtime/gloo/gloo_backend.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <numeric>

#include <fmt/format.h>
#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <hora/error.h>
#include <hora/types.h>

#include "common/duration.h"
#include "common/job_environment.h"
#include "runtime/core/blocks.h"
#include "runtime/core/error_translation.h"
#include "runtime/core/log.h"
#include "runtime/core/reduce.h"
#include "runtime/gloo/checked_sync_allreduce.h"
#include "runtime/gloo/op_check.h"
#include "runtime/gloo/ring_allreduce.h"
#include "runtime/gloo/ring_reduce_scatter.h"
#include "runtime/gloo/sync_allreduce.h"

namespace hora::detail::gloo {
namespace {

// HORA_GLOO_RING=0: large allreduces on Gloo's own ::gloo::allreduce instead of hora's
// pipelined ring (ring_allreduce.h), for side-by-side measurements. Read once.
bool ring_allreduce_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv(job_env::kGlooRing);
    return v == nullptr || std::string(v) != "0";
  }();
  return enabled;
}

enum Kind { kGeneric = 0, kPeer, kTimeout, kMismatch };

// Gloo's options are templated on the element type only to learn its size; an unsigned type of
// the same width stands in for every DataType.
template <typename F>
void with_element(std::size_t size, F&& f) {
  switch (size) {
    case 1: return f(std::uint8_t{});
    case 2: return f(std::uint16_t{});
    case 4: return f(std::uint32_t{});
    case 8: return f(std::uint64_t{});
    default: throw Error(fmt::format("internal: no element type of {} bytes", size));
  }
}

}  // namespace

const char* group_name(Group group) {
  switch (group) {
    case Group::kGlobal: return "global";
    case Group::kLocal: return "local";
    case Group::kCross: return "cross";
    case Group::kEngine: return "engine";
  }
  return "unknown";
}

// What an operation was, formatted only when it fails.
struct GlooBackend::OpInfo {
  explicit OpInfo(const char* n) : name(n) {}
  OpInfo(const char* n, std::size_t c, DataType t) : name(n), count(c), type(t) {}
  OpInfo(const char* n, std::size_t c, DataType t, ReduceOp o)
      : name(n), count(c), type(t), op(o) {}

  const char* name;
  std::size_t count = 0;
  std::optional<DataType> type;
  std::optional<ReduceOp> op;
  int root = -1;
  bool sync = false;  // on the scope's sync twin
  // The cross-rank check before the op (op_check.h): it runs on the sync twin when the scope
  // has one, but a failure there is the op's, reported without the sync pairs' note.
  bool checking = false;
};

struct GlooBackend::ScopeState {
  std::shared_ptr<MeshContext> context;
  std::uint32_t next_tag = 0;
  std::shared_ptr<MeshContext> sync;  // the sync twin, or null
  std::uint32_t next_sync_tag = 0;
  SyncScratch scratch;  // checked_sync_allreduce's and pair_swap's buffers on `sync`
  RingBuffers ring;     // ring_allreduce's and ring_reduce_scatter's, kept across calls
  std::optional<std::string> broken;  // the first failure's message
  int broken_kind = 0;                // which hora::Error subclass it was
};

struct GlooBackend::Scopes : std::array<ScopeState, 4> {};

GlooBackend::GlooBackend(const WorldInfo& world, Mesh mesh, const AbortState& abort)
    : world_(world), mesh_(std::move(mesh)), abort_(abort), scopes_(std::make_unique<Scopes>()) {
  (*scopes_)[static_cast<int>(Group::kGlobal)].context = mesh_.global;
  (*scopes_)[static_cast<int>(Group::kLocal)].context = mesh_.local;
  (*scopes_)[static_cast<int>(Group::kCross)].context = mesh_.cross;
  (*scopes_)[static_cast<int>(Group::kEngine)].context = mesh_.engine;
  (*scopes_)[static_cast<int>(Group::kGlobal)].sync = mesh_.global_sync;
  (*scopes_)[static_cast<int>(Group::kEngine)].sync = mesh_.engine_sync;
  (*scopes_)[static_cast<int>(Group::kCross)].sync = mesh_.cross_sync;
}

GlooBackend::~GlooBackend() = default;

GlooBackend::ScopeState& GlooBackend::state(Group scope) {
  ScopeState& s = scopes_->at(static_cast<std::size_t>(scope));
  if (!s.context) {
    throw Error(fmt::format("internal: {} has no Gloo context for the {} scope", who(world_),
                            group_name(scope)),
                world_.rank, world_.hostname);
  }
  return s;
}

std::string GlooBackend::describe(const OpInfo& info, Group scope) const {
  std::string text = info.name;
  if (info.type) text += fmt::format(" of {} x {}", info.count, name_of(*info.type));
  if (info.op) text += fmt::format(" ({})", name_of(*info.op));
  if (info.root >= 0) text += fmt::format(" from root {}", info.root);
  text += fmt::format(" over the {} group", group_name(scope));
  if (info.sync && !info.checking) {
    text += fmt::format(" (sync Gloo pairs; {}=0 turns them off)", kSyncModeVariable);
  }
  return text;
}

template <typename Body>
void GlooBackend::run(Group scope, const OpInfo& info, Body&& body) {
  ScopeState& s = state(scope);
  if (auto reason = abort_.reason()) {
    throw AbortedError(aborted_message(world_, describe(info, scope), *reason), world_.rank,
                       world_.hostname);
  }
  if (s.broken) {
    const std::string message = fmt::format(
        "{}: {} cannot run: the {} group failed earlier and Gloo closed its "
        "connections: {}",
        who(world_), describe(info, scope), group_name(scope), *s.broken);
    switch (s.broken_kind) {
      case kTimeout: throw TimeoutError(message, world_.rank, world_.hostname);
      case kMismatch: throw MismatchError(message, world_.rank, world_.hostname);
      default: throw Error(message, world_.rank, world_.hostname);
    }
  }
  std::shared_ptr<MeshContext>& context = info.sync ? s.sync : s.context;
  const std::uint32_t tag = info.sync ? s.next_sync_tag++ : s.next_tag++;
  try {
    body(context, tag);
  } catch (...) {
    fail(s, *context, scope, info);
  }
}

void GlooBackend::check(Group scope, const OpInfo& info, const OpHeader& mine) {
  ScopeState& s = state(scope);
  OpInfo exchange = info;
  exchange.sync = s.sync != nullptr;
  exchange.checking = true;
  OpCheck merged = start_check(mine);
  if (exchange.sync) {
    // The check alone on the sync pairs: log2(n) small messages.
    run(scope, exchange, [&](std::shared_ptr<MeshContext>& context, std::uint32_t tag) {
      merged = checked_sync_allreduce(*context, merged, nullptr, 0, 1, nullptr, tag,
                                      mesh_.sync.max_bytes, s.scratch);
    });
  } else {
    std::vector<OpHeader> all(static_cast<std::size_t>(s.context->size));
    run(scope, exchange, [&](std::shared_ptr<MeshContext>& context, std::uint32_t tag) {
      ::gloo::AllgathervOptions opts(context);
      OpHeader input = mine;
      opts.setInput<std::uint8_t>(reinterpret_cast<std::uint8_t*>(&input), sizeof input);
      opts.setOutput<std::uint8_t>(reinterpret_cast<std::uint8_t*>(all.data()),
                                   std::vector<std::size_t>(all.size(), sizeof(OpHeader)));
      opts.setTag(tag);
      opts.setTimeout(world_.timeout);
      ::gloo::allgatherv(opts);
    });
    merged = start_check(all[0]);
    for (std::size_t i = 1; i < all.size(); ++i) {
      const OpCheck next = start_check(all[i]);
      merge_checks(&merged, &merged, &next, sizeof merged);
    }
  }
  throw_if_disagree(scope, info, merged);
}

void GlooBackend::throw_if_disagree(Group scope, const OpInfo& info, const OpCheck& merged) {
  const std::string problem = check_problem(merged);
  if (problem.empty()) return;
  ScopeState& s = state(scope);
  // Every rank found the same problem and none sent data: the scope is broken like after any
  // other failure (as the shared-memory group's), so later collectives fail at once.
  const std::string message =
      fmt::format("{}: {} failed: {}", who(world_), describe(info, scope), problem);
  log().debug("{}", message);
  s.broken = message;
  s.broken_kind = kMismatch;
  throw MismatchError(message, world_.rank, world_.hostname);
}

bool GlooBackend::on_sync(Group scope, std::size_t bytes) {
  const auto& sync = state(scope).sync;
  if (sync == nullptr) return false;
  // A group of 2 swaps buffers of any size there (pair_swap.h): a quarter of the async ring's
  // time for 1 MB between two hosts.
  return bytes <= mesh_.sync.max_bytes || sync->size == 2;
}

void GlooBackend::fail(ScopeState& s, MeshContext& context, Group scope, const OpInfo& info) {
  const std::string what = describe(info, scope);
  if (auto reason = abort_.reason()) {
    throw AbortedError(aborted_message(world_, what, *reason), world_.rank, world_.hostname);
  }
  std::string why;
  bool io = false;
  bool enforce = false;
  try {
    throw;
  } catch (const hora::Error&) {
    throw;
  } catch (const ::gloo::IoException& e) {
    why = e.what();
    io = true;
  } catch (const ::gloo::EnforceNotMet& e) {
    why = e.what();
    enforce = true;
  } catch (const std::exception& e) {
    why = e.what();
  }

  const int peer = context.peer_of(why);
  std::string message;
  int kind = kGeneric;
  // Async waits time out with "Timed out"; a sync pair's read or write with "Read timeout" or
  // "Write timeout" and the peer's address.
  if (io && (why.find("Timed out") != std::string::npos ||
             why.find("Read timeout") != std::string::npos ||
             why.find("Write timeout") != std::string::npos)) {
    kind = kTimeout;
    std::string waiting;
    if (peer >= 0) {
      const MeshPeer p = context.member(peer);
      waiting = fmt::format(" from rank {} ({}, {})", p.global_rank, p.hostname, p.endpoint);
    }
    message = fmt::format(
        "{}: {} failed: no progress for {}{}: another rank of the group died, is stuck, or "
        "called a different collective (see the other ranks' output); if it is only slow, raise "
        "horarun --gloo-timeout-seconds (HORA_TIMEOUT_SECONDS) ({})",
        who(world_), what, format_duration(world_.timeout), waiting, why);
  } else if (io && peer >= 0) {
    kind = kPeer;
    const MeshPeer p = context.member(peer);
    const bool closed = why.find("closed by peer") != std::string::npos ||
                        why.find("reset by peer") != std::string::npos ||
                        why.find("Broken pipe") != std::string::npos;
    message = fmt::format("{}: {} failed: peer rank {} ({}, {}) {}", who(world_), what,
                          p.global_rank, p.hostname, p.endpoint,
                          closed ? "closed the connection (it probably died: see its output)"
                                 : fmt::format("connection failed: {}", why));
  } else if (enforce) {
    kind = kMismatch;
    message = fmt::format(
        "{}: {} failed a Gloo consistency check: {} (do all ranks pass the same "
        "counts, types and roots to this collective?)",
        who(world_), what, why);
  } else {
    message = fmt::format("{}: {} failed: {}", who(world_), what, why);
  }
  log().debug("{}", message);

  // The context is no longer consistent with its peers; later operations on it fail at once.
  // Its remaining connections stay open on purpose: closing them would make the other ranks
  // blame this rank ("peer closed the connection") for another rank's failure. They learn of
  // it from the launcher's abort, or their own timeout.
  s.broken = message;
  s.broken_kind = kind;

  switch (kind) {
    case kPeer:
      throw PeerFailure(message, world_.rank, world_.hostname, context.member(peer).global_rank);
    case kTimeout: throw TimeoutError(message, world_.rank, world_.hostname);
    case kMismatch: throw MismatchError(message, world_.rank, world_.hostname);
    default: throw Error(message, world_.rank, world_.hostname);
  }
}

void GlooBackend::allreduce(void* buffer, std::size_t count, DataType type, ReduceOp op,
                            Group scope) {
  OpInfo info{"allreduce", count, type, op};
  info.sync = on_sync(scope, count * size_of(type));
  if (info.sync) {
    run(scope, info, [&](std::shared_ptr<MeshContext>& context, std::uint32_t tag) {
      sync_allreduce(*context, buffer, count, size_of(type), reduce_function(type, op), tag,
                     state(scope).scratch.swap_inbox);
    });
    return;
  }
  if (count * size_of(type) >= kRingAllreduceMinBytes && ring_allreduce_enabled()) {
    ScopeState& s = state(scope);
    run(scope, info, [&](std::shared_ptr<MeshContext>& context, std::uint32_t tag) {
      ring_allreduce(*context, buffer, count, size_of(type), reduce_function(type, op), tag,
                     world_.timeout, s.ring.scratch);
    });
    return;
  }
  run(scope, info, [&](std::shared_ptr<MeshContext>& context, std::uint32_t tag) {
    ::gloo::AllreduceOptions opts(context);
    with_element(size_of(type),
                 [&]<typename S>(S) { opts.setOutput<S>(static_cast<S*>(buffer), count); });
    opts.setReduceFunction(reduce_function(type, op));
    opts.setTag(tag);
    opts.setTimeout(world_.timeout);
    ::gloo::allreduce(opts);
  });
}

void GlooBackend::allgather(const void* sendbuf, std::size_t count, void* recvbuf,
                            const std::vector<std::size_t>& counts, DataType type, Group scope) {
  run(scope, {"allgather", count, type},
      [&](std::shared_ptr<MeshContext>& context, std::uint32_t tag) {
        const std::size_t element = size_of(type);
        const std::size_t total = std::accumulate(counts.begin(), counts.end(), std::size_t{0});
        const std::size_t offset =
            std::accumulate(counts.begin(), counts.begin() + context->rank, std::size_t{0}) *
            element;
        auto* out = static_cast<unsigned char*>(recvbuf);
        // Gloo copies the input into its slot of the output first; in place needs no input, and an
        // input overlapping the output elsewhere is staged so the ring cannot overwrite it.
        const bool in_place = sendbuf == out + offset;
        std::vector<unsigned char> staged;
        const void* input = sendbuf;
        if (!in_place && overlap(sendbuf, count * element, recvbuf, total * element)) {
          staged.assign(static_cast<const unsigned char*>(sendbuf),
                        static_cast<const unsigned char*>(sendbuf) + count * element);
          input = staged.data();
        }
        ::gloo::AllgathervOptions opts(context);
        with_element(element, [&]<typename S>(S) {
          if (!in_place) opts.setInput<S>(static_cast<S*>(const_cast<void*>(input)), count);
          opts.setOutput<S>(static_cast<S*>(recvbuf), counts);
        });
        opts.setTag(tag);
        opts.setTimeout(world_.timeout);
        ::gloo::allgatherv(opts);
      });
}

std::vector<std::size_t> GlooBackend::allgather_counts(std::size_t count, Group scope) {
  if (scope != Group::kEngine) {
    check(scope, OpInfo{"allgather_counts"}, make_header(OpKind::kAllgatherCounts, world_.rank));
  }
  std::vector<std::uint64_t> all(static_cast<std::size_t>(state(scope).context->size));
  std::uint64_t mine = count;
  run(scope, OpInfo{"allgather_counts"},
      [&](std::shared_ptr<MeshContext>& context, std::uint32_t tag) {
        ::gloo::AllgathervOptions opts(context);
        opts.setInput<std::uint64_t>(&mine, 1);
        opts.setOutput<std::uint64_t>(all.data(), std::vector<std::size_t>(all.size(), 1));
        opts.setTag(tag);
        opts.setTimeout(world_.timeout);
        ::gloo::allgatherv(opts);
      });
  return {all.begin(), all.end()};
}

void GlooBackend::broadcast(void* buffer, std::size_t count, DataType type, int root, Group scope) {
  OpInfo info{"broadcast", count, type};
  info.root = root;
  run(scope, info, [&](std::shared_ptr<MeshContext>& context, std::uint32_t tag) {
    ::gloo::BroadcastOptions opts(context);
    with_element(size_of(type),
                 [&]<typename S>(S) { opts.setOutput<S>(static_cast<S*>(buffer), count); });
    opts.setRoot(root);
    opts.setTag(tag);
    opts.setTimeout(world_.timeout);
    ::gloo::broadcast(opts);
  });
}

void GlooBackend::alltoall(const void* sendbuf, const std::vector<std::size_t>& send_splits,
                           void* recvbuf, const std::vector<std::size_t>& recv_splits,
                           DataType type, Group scope) {
  const std::size_t element = size_of(type);
  const std::size_t sent = std::accumulate(send_splits.begin(), send_splits.end(), std::size_t{0});
  const std::size_t received =
      std::accumulate(recv_splits.begin(), recv_splits.end(), std::size_t{0});
  run(scope, {"alltoall", sent, type},
      [&](std::shared_ptr<MeshContext>& context, std::uint32_t tag) {
        // Gloo sends straight from the input while receiving into the output: stage an input that
        // overlaps the output (in place included).
        std::vector<unsigned char> staged;
        const void* input = sendbuf;
        if (overlap(sendbuf, sent * element, recvbuf, received * element)) {
          staged.assign(static_cast<const unsigned char*>(sendbuf),
                        static_cast<const unsigned char*>(sendbuf) + sent * element);
          input = staged.data();
        }
        ::gloo::AlltoallvOptions opts(context);
        std::vector<std::int64_t> in(send_splits.begin(), send_splits.end());
        std::vector<std::int64_t> out(recv_splits.begin(), recv_splits.end());
        with_element(element, [&]<typename S>(S) {
          opts.setInput<S>(static_cast<S*>(const_cast<void*>(input)), in);
          opts.setOutput<S>(static_cast<S*>(recvbuf), out);
        });
        opts.setTag(tag);
        opts.setTimeout(world_.timeout);
        ::gloo::alltoallv(opts);
      });
}

std::vector<std::size_t> GlooBackend::alltoall_splits(const std::vector<std::size_t>& send_splits,
                                                      Group scope) {
  if (scope != Group::kEngine) {
    check(scope, OpInfo{"alltoall_splits"}, make_header(OpKind::kAlltoallSplits, world_.rank));
  }
  std::vector<std::uint64_t> out(send_splits.begin(), send_splits.end());
  std::vector<std::uint64_t> in(send_splits.size());
  run(scope, OpInfo{"alltoall_splits"},
      [&](std::shared_ptr<MeshContext>& context, std::uint32_t tag) {
        ::gloo::AlltoallvOptions opts(context);
        const std::vector<std::int64_t> ones(out.size(), 1);
        opts.setInput<std::uint64_t>(out.data(), ones);
        opts.setOutput<std::uint64_t>(in.data(), ones);
        opts.setTag(tag);
        opts.setTimeout(world_.timeout);
        ::gloo::alltoallv(opts);
      });
  return {in.begin(), in.end()};
}

void GlooBackend::reducescatter(const void* sendbuf, void* recvbuf,
                                const std::vector<std::size_t>& block_counts, DataType type,
                                ReduceOp op, Group scope) {
  const std::size_t count =
      std::accumulate(block_counts.begin(), block_counts.end(), std::size_t{0});
  ScopeState& s = state(scope);
  run(scope, {"reducescatter", count, type, op},
      [&](std::shared_ptr<MeshContext>& context, std::uint32_t tag) {
        ring_reduce_scatter(*context, sendbuf, recvbuf, block_counts, size_of(type),
                            reduce_function(type, op), tag, world_.timeout, s.ring);
      });
}

void GlooBackend::barrier(Group scope) {
  run(scope, OpInfo{"barrier"}, [&](std::shared_ptr<MeshContext>& context, std::uint32_t tag) {
    ::gloo::BarrierOptions opts(context);
    opts.setTag(tag);
    opts.setTimeout(world_.timeout);
    ::gloo::barrier(opts);
  });
}

void GlooBackend::allreduce_custom(void* buffer, std::size_t count, std::size_t element_size,
                                   ReduceFn reduce, const char* name, Group scope) {
  OpInfo info{name};
  info.sync = on_sync(scope, count * element_size);
  if (info.sync) {
    run(scope, info, [&](std::shared_ptr<MeshContext>& context, std::uint32_t tag) {
      sync_allreduce(*context, buffer, count, element_size, reduce, tag,
                     state(scope).scratch.swap_inbox);
    });
    return;
  }
  run(scope, info, [&](std::shared_ptr<MeshContext>& context, std::uint32_t tag) {
    ::gloo::AllreduceOptions opts(context);
    with_element(element_size,
                 [&]<typename S>(S) { opts.setOutput<S>(static_cast<S*>(buffer), count); });
    opts.setReduceFunction(reduce);
    opts.setTag(tag);
    opts.setTimeout(world_.timeout);
    ::gloo::allreduce(opts);
  });
}

int GlooBackend::size_of_scope(Scope scope) const {
  switch (scope) {
    case Scope::kGlobal: return world_.size;
    case Scope::kLocal: return world_.local_size;
    case Scope::kCross: return world_.cross_size;
  }
  return 0;
}

int GlooBackend::rank_in(Scope scope) const {
  switch (scope) {
    case Scope::kGlobal: return world_.rank;
    case Scope::kLocal: return world_.local_rank;
    case Scope::kCross: return world_.cross_rank;
  }
  return 0;
}

void GlooBackend::allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType type,
                            ReduceOp op, Scope scope, void* /*stream*/) {
  // count 0 runs the check alone: a rank passing 0 while the others pass N gets MismatchError.
  if (sendbuf != recvbuf && count > 0) std::memmove(recvbuf, sendbuf, count * hora::size_of(type));
  const Group group = group_of(scope);
  OpInfo info{"allreduce", count, type, op};
  const OpHeader mine = make_header(OpKind::kAllreduce, world_.rank, count, &type, &op);
  info.sync = on_sync(group, count * size_of(type));
  if (info.sync) {
    // The check rides in the data's messages (checked_sync_allreduce.h): no extra round trip.
    OpCheck merged = start_check(mine);
    ScopeState& s = state(group);
    run(group, info, [&](std::shared_ptr<MeshContext>& context, std::uint32_t tag) {
      merged =
          checked_sync_allreduce(*context, merged, recvbuf, count, size_of(type),
                                 reduce_function(type, op), tag, mesh_.sync.max_bytes, s.scratch);
    });
    throw_if_disagree(group, info, merged);
  } else {
    check(group, info, mine);
    if (count == 0) return;
    allreduce(recvbuf, count, type, op, group);
  }
  if (op == ReduceOp::kAverage && count > 0) divide(recvbuf, count, type, size_of_scope(scope));
}

void GlooBackend::allgather(const void* sendbuf, std::size_t count, void* recvbuf,
                            const std::vector<std::size_t>& counts, DataType type, Scope scope,
                            void* /*stream*/) {
  const std::size_t total = std::accumulate(counts.begin(), counts.end(), std::size_t{0});
  check(group_of(scope), {"allgather", count, type},
        make_header(OpKind::kAllgather, world_.rank, total, &type, nullptr, -1,
                    hash_counts(counts)));
  allgather(sendbuf, count, recvbuf, counts, type, group_of(scope));
}

void GlooBackend::broadcast(void* buffer, std::size_t count, DataType type, int root, Scope scope,
                            void* /*stream*/) {
  OpInfo info{"broadcast", count, type};
  info.root = root;
  check(group_of(scope), info,
        make_header(OpKind::kBroadcast, world_.rank, count, &type, nullptr, root));
  if (count == 0) return;  // the check alone (see allreduce)
  broadcast(buffer, count, type, root, group_of(scope));
}

void GlooBackend::alltoall(const void* sendbuf, const std::vector<std::size_t>& send_splits,
                           void* recvbuf, const std::vector<std::size_t>& recv_splits,
                           DataType type, Scope scope, void* /*stream*/) {
  const std::size_t sent = std::accumulate(send_splits.begin(), send_splits.end(), std::size_t{0});
  check(group_of(scope), {"alltoall", sent, type},
        make_header(OpKind::kAlltoall, world_.rank, sent, &type, nullptr, -1, 0,
                    splits_balance(rank_in(scope), send_splits, recv_splits)));
  alltoall(sendbuf, send_splits, recvbuf, recv_splits, type, group_of(scope));
}

void GlooBackend::reducescatter(const void* sendbuf, std::size_t count, void* recvbuf,
                                DataType type, ReduceOp op, Scope scope, void* /*stream*/) {
  check(group_of(scope), {"reducescatter", count, type, op},
        make_header(OpKind::kReducescatter, world_.rank, count, &type, &op));
  if (count == 0) return;  // the check alone (see allreduce)
  const int n = size_of_scope(scope);
  const std::vector<std::size_t> blocks = block_counts(count, n);
  reducescatter(sendbuf, recvbuf, blocks, type, op, group_of(scope));
  if (op == ReduceOp::kAverage) divide(recvbuf, blocks[rank_in(scope)], type, n);
}

void GlooBackend::barrier(Scope scope, void* /*stream*/) {
  check(group_of(scope), OpInfo{"barrier"}, make_header(OpKind::kBarrier, world_.rank));
  barrier(group_of(scope));
}

void GlooBackend::abort(const std::string& reason) { close_all(reason); }

void GlooBackend::close_all(const std::string& reason) {
  for (auto& s : *scopes_) {
    if (s.context) s.context->fail(reason);
    if (s.sync) s.sync->fail(reason);
  }
}

}  // namespace hora::detail::gloo
