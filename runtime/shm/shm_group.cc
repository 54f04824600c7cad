#include "runtime/shm/shm_group.h"

#include <fmt/format.h>
#include <hora/error.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <new>
#include <thread>

#include "common/duration.h"
#include "common/fnv.h"
#include "common/text.h"
#include "runtime/core/blocks.h"
#include "runtime/core/copy.h"
#include "runtime/core/reduce.h"
#include "runtime/core/splits_balance.h"
#include "runtime/shm/futex.h"

namespace hora::detail::shm {
namespace {

using Clock = std::chrono::steady_clock;

// Failure kinds (which hora::Error subclass a failure raises).
enum Kind { kGeneric = 0, kTimeout = 1, kPeer = 2, kMismatch = 3, kAborted = 4 };

// Waiting: spin this many rounds, then yield this many times, then sleep on the futex in slices
// (checking peers, abort and the deadline between slices).
// Waiting (ShmOptions::spin_time and yield_time): spin, then spin with sched_yield, then sleep
// on the futex in slices of this length.
constexpr auto kSleepSlice = std::chrono::milliseconds(10);

// allreduce of at most this many bytes: every rank reduces the whole buffer (one barrier).
constexpr std::size_t kSmallAllreduceBytes = 16 * 1024;
// allreduce above that: each rank reduces its slice in blocks of this many bytes.
constexpr std::size_t kReduceBlockBytes = 16 * 1024;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Copies into the caller's output buffer: with non-temporal stores when the collective writes
// at least kStreamOutputBytes there (copy.h), with plain ones below.
using CopyFn = void (*)(void*, const void*, std::size_t);
CopyFn output_copy(std::size_t output_bytes) {
  return output_bytes >= kStreamOutputBytes ? stream_bytes : copy_bytes;
}

std::size_t round_down(std::size_t v, std::size_t to) { return v / to * to; }
std::size_t round_up(std::size_t v, std::size_t to) { return (v + to - 1) / to * to; }

// A collective's identity, compared across ranks after its first barrier.
std::uint64_t signature(int kind, DataType type, int op, std::uint64_t detail) {
  return Fnv1a64()
      .word(static_cast<std::uint64_t>(kind))
      .word(static_cast<std::uint64_t>(type))
      .word(static_cast<std::uint64_t>(op))
      .word(detail)
      .value();
}

std::uint64_t hash_counts(const std::vector<std::size_t>& counts) {
  Fnv1a64 h;
  for (std::size_t c : counts) h.word(c);
  return h.value();
}

std::vector<std::size_t> displacements(const std::vector<std::size_t>& counts) {
  std::vector<std::size_t> d(counts.size(), 0);
  for (std::size_t i = 1; i < counts.size(); ++i) d[i] = d[i - 1] + counts[i - 1];
  return d;
}

}  // namespace

// What a collective is, formatted only when it fails (as GlooBackend::describe).
struct ShmGroup::Op {
  Op(const char* name, const char* group, std::size_t count = 0,
     std::optional<DataType> type = std::nullopt, std::optional<ReduceOp> op = std::nullopt)
      : name(name), group(group), count(count), type(type), op(op) {}

  const char* name;
  const char* group;
  std::size_t count = 0;
  std::optional<DataType> type;
  std::optional<ReduceOp> op;
  int root = -1;

  std::string describe() const {
    std::string text = name;
    if (type) text += fmt::format(" of {} x {}", count, name_of(*type));
    if (op) text += fmt::format(" ({})", name_of(*op));
    if (root >= 0) text += fmt::format(" from root {}", root);
    text += fmt::format(" over the {} group", group);
    return text;
  }
};

std::size_t ShmGroup::segment_bytes(int size, std::size_t region_bytes) {
  const std::size_t n = static_cast<std::size_t>(size);
  const std::size_t region = std::max<std::size_t>(kCacheLine, round_up(region_bytes, kCacheLine));
  const std::size_t data_offset = round_up(sizeof(Header) + n * sizeof(RankState), 4096);
  return data_offset + 2 * n * region;
}

ShmGroup::ShmGroup(const std::string& name, ShmOptions options, Clock::time_point start_deadline)
    : options_(std::move(options)),
      who_(rank_name(options_.global_rank, options_.host)),
      me_(options_.local_rank),
      size_(options_.local_size),
      region_bytes_(
          std::max<std::size_t>(kCacheLine, round_up(options_.region_bytes, kCacheLine))) {
  const std::size_t bytes = segment_bytes(size_, region_bytes_);
  const std::size_t data_offset =
      round_up(sizeof(Header) + static_cast<std::size_t>(size_) * sizeof(RankState), 4096);
  const std::string step =
      fmt::format("{}: forming the shared-memory group of the {} local ranks", who_, size_);
  try {
    if (me_ == 0) {
      segment_ = Segment::create(name, bytes);
      auto* header = new (segment_.data()) Header{};
      header->size = static_cast<std::uint32_t>(size_);
      header->region_bytes = region_bytes_;
      header->data_offset = data_offset;
      auto* ranks =
          reinterpret_cast<RankState*>(static_cast<char*>(segment_.data()) + sizeof(Header));
      for (int i = 0; i < size_; ++i) new (&ranks[i]) RankState{};
      header->magic.store(kMagic, std::memory_order_release);
    } else {
      segment_ = Segment::open(name, bytes, start_deadline);
    }
  } catch (const hora::Error&) {
    throw;
  } catch (const std::exception& e) {
    Segment::unlink(name);
    throw Error(fmt::format("{}: {}; set HORA_SHM=0 to use Gloo between local ranks instead", step,
                            e.what()),
                options_.global_rank, options_.host);
  }
  header_ = static_cast<Header*>(segment_.data());
  ranks_ = reinterpret_cast<RankState*>(static_cast<char*>(segment_.data()) + sizeof(Header));
  data_ = static_cast<char*>(segment_.data()) + data_offset;
  try {
    Lock lock(op_mu_);
    attach(start_deadline);
  } catch (...) {
    Segment::unlink(name);
    throw;
  }
}

ShmGroup::~ShmGroup() = default;

void ShmGroup::attach(Clock::time_point start_deadline) {
  const std::string step =
      fmt::format("{}: forming the shared-memory group of the {} local ranks", who_, size_);
  while (header_->magic.load(std::memory_order_acquire) != kMagic) {
    throw_if_aborted(step);
    if (Clock::now() >= start_deadline) {
      throw TimeoutError(fmt::format("{}: segment {} was never initialised by local rank 0; raise "
                                     "HORA_START_TIMEOUT, or set HORA_SHM=0",
                                     step, segment_.name()),
                         options_.global_rank, options_.host);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (header_->size != static_cast<std::uint32_t>(size_) ||
      header_->region_bytes != region_bytes_) {
    throw Error(fmt::format("{}: segment {} is laid out for {} ranks x {} bytes, this rank expects "
                            "{} x {}",
                            step, segment_.name(), header_->size, header_->region_bytes, size_,
                            region_bytes_),
                options_.global_rank, options_.host);
  }
  RankState& mine = ranks_[me_];
  mine.pid.store(static_cast<std::int32_t>(::getpid()), std::memory_order_relaxed);
  mine.global_rank.store(options_.global_rank, std::memory_order_relaxed);
  const std::uint32_t now = header_->attached.fetch_add(1, std::memory_order_acq_rel) + 1;
  if (now == static_cast<std::uint32_t>(size_)) {
    // Every rank has it mapped: from here on no name exists that a killed job could leave behind.
    Segment::unlink(segment_.name());
    futex_wake_all(&header_->attached);
  }
  for (;;) {
    const std::uint32_t seen = header_->attached.load(std::memory_order_acquire);
    if (seen >= static_cast<std::uint32_t>(size_)) break;
    throw_if_aborted(step);
    const auto left = start_deadline - Clock::now();
    if (left <= Clock::duration::zero()) {
      std::string missing;
      for (int i = 0; i < size_; ++i) {
        if (ranks_[i].pid.load(std::memory_order_relaxed) == 0) {
          missing += fmt::format("{}{}", missing.empty() ? "" : ", ", i);
        }
      }
      throw TimeoutError(fmt::format("{}: local ranks {} never mapped segment {}; raise "
                                     "HORA_START_TIMEOUT, or set HORA_SHM=0",
                                     step, missing, segment_.name()),
                         options_.global_rank, options_.host);
    }
    futex_wait(&header_->attached, seen,
               std::min<Clock::duration>(left, std::chrono::milliseconds(50)));
  }
  for (int i = 0; i < size_; ++i) {
    pids_.push_back(static_cast<pid_t>(ranks_[i].pid.load(std::memory_order_relaxed)));
  }
  peers_ = PeerWatch(pids_);
}

void ShmGroup::throw_if_aborted(const std::string& step) const {
  if (!options_.aborted) return;
  if (auto reason = options_.aborted()) {
    // The same text as every other step's abort (error_translation.h's aborted_message).
    throw AbortedError(fmt::format("{} failed: job aborted by launcher: {}", step, *reason),
                       options_.global_rank, options_.host);
  }
}

int ShmGroup::global_rank_of(int i) const {
  return ranks_[i].global_rank.load(std::memory_order_relaxed);
}

char* ShmGroup::region(int rank, int half) const {
  return data_ + (static_cast<std::size_t>(half) * static_cast<std::size_t>(size_) +
                  static_cast<std::size_t>(rank)) *
                     region_bytes_;
}

void ShmGroup::abort(const std::string& reason) {
  {
    Lock lock(abort_mutex_);
    if (aborted_.load()) return;
    abort_reason_ = reason;
    aborted_.store(true);
  }
  // Wakes every sleeper on the group (other processes' too: they re-check and sleep again).
  futex_wake_all(&header_->arrivals);
}

void ShmGroup::close_abruptly() {
  Lock lock(op_mu_);
  std::uint32_t expected = 0;
  header_->broken_rank.store(me_, std::memory_order_relaxed);
  header_->broken_kind.compare_exchange_strong(expected,
                                               static_cast<std::uint32_t>(Broken::kClosed));
  futex_wake_all(&header_->arrivals);
  broken_ = fmt::format("{}: this rank closed its shared-memory group abruptly", who_);
  broken_kind_ = kGeneric;
}

void ShmGroup::enter(const Op& op) {
  if (aborted_.load(std::memory_order_relaxed)) fail(op, kAborted, "", -1);
  if (broken_) {
    const std::string message =
        fmt::format("{}: {} cannot run: the shared-memory group failed earlier: {}", who_,
                    op.describe(), *broken_);
    switch (broken_kind_) {
      case kTimeout: throw TimeoutError(message, options_.global_rank, options_.host);
      case kPeer: throw PeerFailure(message, options_.global_rank, options_.host, -1);
      case kMismatch: throw MismatchError(message, options_.global_rank, options_.host);
      default: throw Error(message, options_.global_rank, options_.host);
    }
  }
  if (header_->broken_kind.load(std::memory_order_acquire) != 0) fail_broken(op);
}

void ShmGroup::sync(const Op& op) {
  const std::uint32_t b = ++barriers_;
  const std::uint32_t target = b * static_cast<std::uint32_t>(size_);
  ranks_[me_].arrived.store(b, std::memory_order_relaxed);
  const std::uint32_t now = header_->arrivals.fetch_add(1, std::memory_order_seq_cst) + 1;
  if (header_->sleepers.load(std::memory_order_seq_cst) != 0) {
    futex_wake_all(&header_->arrivals);
  }
  if (static_cast<std::int32_t>(now - target) >= 0) return;
  wait(op, b, target);
}

void ShmGroup::first_sync(const Op& op, int half, std::uint64_t sig) {
  ranks_[me_].signature[half].store(sig, std::memory_order_relaxed);
  sync(op);
  for (int i = 0; i < size_; ++i) {
    if (ranks_[i].signature[half].load(std::memory_order_relaxed) != sig) {
      fail(op, kMismatch,
           fmt::format("local rank {} (rank {}) called a different collective, or passed other "
                       "counts, types, ops or roots (do all ranks call the same collectives in "
                       "the same order?)",
                       i, global_rank_of(i)),
           -1);
    }
  }
}

void ShmGroup::wait(const Op& op, std::uint32_t b, std::uint32_t target) {
  auto done = [&](std::uint32_t seen) { return static_cast<std::int32_t>(seen - target) >= 0; };
  auto& arrivals = header_->arrivals;
  const auto start = Clock::now();
  for (;;) {
    for (int i = 0; i < 16; ++i) {
      if (done(arrivals.load(std::memory_order_acquire))) return;
      cpu_relax();
    }
    const auto waited = Clock::now() - start;
    if (waited >= options_.yield_time) break;
    if (waited >= options_.spin_time) ::sched_yield();
  }
  const auto deadline = Clock::now() + options_.timeout;
  for (;;) {
    const std::uint32_t seen = arrivals.load(std::memory_order_acquire);
    if (done(seen)) return;
    if (aborted_.load(std::memory_order_relaxed)) fail(op, kAborted, "", -1);
    if (header_->broken_kind.load(std::memory_order_acquire) != 0) fail_broken(op);
    check_peers(op, b);
    const auto now = Clock::now();
    if (now >= deadline) {
      std::string missing;
      for (int i = 0; i < size_; ++i) {
        if (static_cast<std::int32_t>(ranks_[i].arrived.load(std::memory_order_relaxed) - b) < 0) {
          missing += fmt::format("{}local rank {} (rank {})", missing.empty() ? "" : ", ", i,
                                 global_rank_of(i));
        }
      }
      fail(op, kTimeout,
           fmt::format("no progress for {} over shared memory, waiting for {}: it died, is "
                       "stuck, or called a different collective (see its output); if it is only "
                       "slow, raise horarun --gloo-timeout-seconds (HORA_TIMEOUT_SECONDS)",
                       format_duration(options_.timeout), missing),
           -1);
    }
    header_->sleepers.fetch_add(1, std::memory_order_seq_cst);
    if (arrivals.load(std::memory_order_seq_cst) == seen) {
      futex_wait(&arrivals, seen, std::min<Clock::duration>(kSleepSlice, deadline - now));
    }
    header_->sleepers.fetch_sub(1, std::memory_order_seq_cst);
  }
}

void ShmGroup::check_peers(const Op& op, std::uint32_t b) {
  for (int i = 0; i < size_; ++i) {
    if (i == me_) continue;
    if (static_cast<std::int32_t>(ranks_[i].arrived.load(std::memory_order_acquire) - b) >= 0) {
      continue;  // it arrived: whatever happened to it since does not block this barrier
    }
    if (!peers_.dead(i)) continue;
    // Tell every other waiter, so they all name the same rank without polling for it.
    header_->broken_rank.store(i, std::memory_order_relaxed);
    std::uint32_t expected = 0;
    header_->broken_kind.compare_exchange_strong(expected,
                                                 static_cast<std::uint32_t>(Broken::kDied),
                                                 std::memory_order_release);
    futex_wake_all(&header_->arrivals);
    fail_broken(op);
  }
}

void ShmGroup::fail_broken(const Op& op) {
  const auto kind = static_cast<Broken>(header_->broken_kind.load(std::memory_order_acquire));
  const int peer = header_->broken_rank.load(std::memory_order_relaxed);
  const int global = global_rank_of(peer);
  const std::string why =
      kind == Broken::kDied
          ? fmt::format(
                "peer rank {} ({}, local rank {}, pid {}) exited in the middle of it (it "
                "probably died: see its output)",
                global, options_.host, peer, pids_.empty() ? 0 : pids_[peer])
          : fmt::format(
                "peer rank {} ({}, local rank {}) closed the connection (it probably "
                "died: see its output)",
                global, options_.host, peer);
  fail(op, kPeer, why, global);
}

void ShmGroup::fail(const Op& op, int kind, const std::string& why, int peer) {
  if (kind == kAborted) {
    std::string reason;
    {
      Lock lock(abort_mutex_);
      reason = abort_reason_;
    }
    // The same text as every other step's abort (error_translation.h's aborted_message).
    throw AbortedError(fmt::format("{}: {} failed: job aborted by launcher: {}", who_,
                                   op.describe(), reason),
                       options_.global_rank, options_.host);
  }
  const std::string message = fmt::format("{}: {} failed: {}", who_, op.describe(), why);
  // The barrier counts no longer agree with the peers': the group is unusable for this rank.
  broken_ = message;
  broken_kind_ = kind;
  switch (kind) {
    case kTimeout: throw TimeoutError(message, options_.global_rank, options_.host);
    case kPeer: throw PeerFailure(message, options_.global_rank, options_.host, peer);
    case kMismatch: throw MismatchError(message, options_.global_rank, options_.host);
    default: throw Error(message, options_.global_rank, options_.host);
  }
}

// --- Collectives. ---

void ShmGroup::allreduce(void* buffer, std::size_t count, DataType type, ReduceOp op,
                         const char* group) {
  allreduce(buffer, buffer, count, type, op, group);
}

void ShmGroup::allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType type,
                         ReduceOp op, const char* group) {
  Lock lock(op_mu_);
  const Op info{"allreduce", group, count, type, op};
  enter(info);
  const std::size_t e = size_of(type);
  const char* in = static_cast<const char*>(sendbuf);
  char* out = static_cast<char*>(recvbuf);
  if (in != out && overlap(in, count * e, out, count * e)) {
    // Partly overlapping buffers: in place on the receive buffer.
    std::memmove(out, in, count * e);
    in = out;
  }
  reduce_all(info, in, out, count, e, reduce_function(type, op),
             signature(0, type, static_cast<int>(op), count));
}

void ShmGroup::allreduce_custom(void* buffer, std::size_t count, std::size_t element_size,
                                ReduceFn reduce, const char* name, const char* group) {
  Lock lock(op_mu_);
  const Op info{name, group};
  enter(info);
  reduce_all(info, static_cast<const char*>(buffer), static_cast<char*>(buffer), count,
             element_size, reduce,
             signature(6, DataType::kUInt8, static_cast<int>(element_size), count));
}

void ShmGroup::reduce_all(const Op& info, const char* in, char* out, std::size_t count,
                          std::size_t e, ReduceFn reduce, std::uint64_t sig) {
  const std::size_t bytes = count * e;
  const int n = size_;
  if (n == 1) {
    if (in != out) std::memmove(out, in, bytes);
    first_sync(info, next_half(), sig);
    return;
  }

  if (bytes <= kSmallAllreduceBytes && bytes <= region_bytes_) {
    const int h = next_half();
    copy_bytes(region(me_, h), in, bytes);
    first_sync(info, h, sig);
    reduce(out, region(0, h), region(1, h), count);
    for (int k = 2; k < n; ++k) reduce(out, out, region(k, h), count);
    return;
  }

  const std::size_t chunk = region_bytes_ / e;  // elements per step
  const CopyFn put = output_copy(bytes);
  bool first = true;
  for (std::size_t off = 0; off < count; off += chunk) {
    const std::size_t len = std::min(chunk, count - off);
    const int h = next_half();
    // Slice boundaries on 64-byte multiples where the chunk allows.
    auto bound = [&](int j) {
      const std::size_t granule = std::max<std::size_t>(1, kCacheLine / e);
      return std::min(len, round_down(len * static_cast<std::size_t>(j) / n, granule));
    };
    const std::size_t lo = bound(me_);
    const std::size_t hi = me_ + 1 == n ? len : bound(me_ + 1);
    // Published: every slice but this rank's own, which it reduces from its input directly.
    copy_bytes(region(me_, h), in + off * e, lo * e);
    copy_bytes(region(me_, h) + hi * e, in + (off + hi) * e, (len - hi) * e);
    if (first) {
      first_sync(info, h, sig);
      first = false;
    } else {
      sync(info);
    }
    // Rank 0's data, then rank 1's, and so on, as the small path above and every other slice:
    // an element's result does not depend on which rank reduced it, so neither does it on how
    // the buffer was cut into slices and chunks (the engine fuses different tensors together
    // from one run to the next). One cache-sized block at a time: each block is reduced while
    // it stays in the first-level cache and then published from there for the other ranks to
    // copy. All steps but the last go to the scratch block: in place, the output is this
    // rank's input, which a step before its own turn must not overwrite.
    const std::size_t block = std::max<std::size_t>(1, kReduceBlockBytes / e);
    const std::size_t lines = (block * e + kCacheLine - 1) / kCacheLine;
    if (scratch_.size() < lines) scratch_.resize(lines);
    char* tmp = scratch_.data()->bytes;
    for (std::size_t b0 = lo; b0 < hi; b0 += block) {
      const std::size_t m = std::min(block, hi - b0);
      auto source = [&](int k) -> const char* {
        return k == me_ ? in + (off + b0) * e : region(k, h) + b0 * e;
      };
      const char* a = source(0);
      for (int k = 1; k + 1 < n; ++k) {
        reduce(tmp, a, source(k), m);
        a = tmp;
      }
      char* acc = out + (off + b0) * e;
      reduce(acc, a, source(n - 1), m);
      copy_bytes(region(me_, h) + b0 * e, acc, m * e);
    }
    sync(info);
    for (int j = 0; j < n; ++j) {
      if (j == me_) continue;  // reduced into the output above
      const std::size_t a = bound(j);
      const std::size_t b = j + 1 == n ? len : bound(j + 1);
      if (b > a) put(out + (off + a) * e, region(j, h) + a * e, (b - a) * e);
    }
  }
}

void ShmGroup::allgather(const void* sendbuf, std::size_t count, void* recvbuf,
                         const std::vector<std::size_t>& counts, DataType type, const char* group) {
  Lock lock(op_mu_);
  const Op info{"allgather", group, count, type};
  enter(info);
  const std::size_t e = size_of(type);
  const auto disp = displacements(counts);
  const std::size_t max_bytes = *std::max_element(counts.begin(), counts.end()) * e;
  const std::size_t steps =
      std::max<std::size_t>(1, (max_bytes + region_bytes_ - 1) / region_bytes_);
  const char* send = static_cast<const char*>(sendbuf);
  char* recv = static_cast<char*>(recvbuf);
  const std::size_t my_bytes = count * e;
  const CopyFn put = output_copy((disp.back() + counts.back()) * e);
  // In place (sendbuf is this rank's block of recvbuf) works: the own block is copied from the
  // send buffer before anything else is written.
  std::vector<char> copy;
  if (send != recv + disp[me_] * e &&
      overlap(send, my_bytes, recv, (disp.back() + counts.back()) * e)) {
    copy.assign(send, send + my_bytes);
    send = copy.data();
  }
  for (std::size_t t = 0; t < steps; ++t) {
    const std::size_t at = t * region_bytes_;
    const int h = next_half();
    if (at < my_bytes)
      copy_bytes(region(me_, h), send + at, std::min(region_bytes_, my_bytes - at));
    if (t == 0) {
      first_sync(info, h, signature(1, type, 0, hash_counts(counts)));
    } else {
      sync(info);
    }
    for (int k = 0; k < size_; ++k) {
      const std::size_t kb = counts[k] * e;
      if (k == me_ || at >= kb) continue;
      put(recv + disp[k] * e + at, region(k, h), std::min(region_bytes_, kb - at));
    }
  }
  if (my_bytes > 0 && send != recv + disp[me_] * e) {
    put(recv + disp[me_] * e, send, my_bytes);  // disjoint: an overlapping send was copied
  }
}

void ShmGroup::broadcast(void* buffer, std::size_t count, DataType type, int root,
                         const char* group) {
  Lock lock(op_mu_);
  Op info{"broadcast", group, count, type};
  info.root = root;
  enter(info);
  const std::size_t bytes = count * size_of(type);
  const std::size_t step_bytes = half_bytes();  // the root fills a whole half
  char* buf = static_cast<char*>(buffer);
  const CopyFn put = output_copy(bytes);
  for (std::size_t at = 0, t = 0; at < bytes || t == 0; at += step_bytes, ++t) {
    const std::size_t len = std::min(step_bytes, bytes - at);
    const int h = next_half();
    char* half = region(0, h);
    if (me_ == root) copy_bytes(half, buf + at, len);
    if (t == 0) {
      first_sync(info, h, signature(2, type, root, count));
    } else {
      sync(info);
    }
    if (me_ != root) put(buf + at, half, len);
  }
}

void ShmGroup::reducescatter(const void* sendbuf, void* recvbuf,
                             const std::vector<std::size_t>& blocks, DataType type, ReduceOp op,
                             const char* group) {
  Lock lock(op_mu_);
  std::size_t count = 0;
  for (std::size_t b : blocks) count += b;
  const Op info{"reducescatter", group, count, type, op};
  enter(info);
  const std::size_t e = size_of(type);
  const ReduceFn reduce = reduce_function(type, op);
  const auto disp = displacements(blocks);
  const int n = size_;
  // Each region holds one sub-slot per destination rank.
  const std::size_t sub = round_down(region_bytes_ / static_cast<std::size_t>(n), kCacheLine);
  const std::size_t q = std::max<std::size_t>(1, sub / e);  // elements per sub-slot and step
  if (sub < e) {
    fail(info, kGeneric,
         fmt::format("the shared-memory region ({} bytes) is too small for {} ranks", region_bytes_,
                     n),
         -1);
  }
  const std::size_t max_block = *std::max_element(blocks.begin(), blocks.end());
  const std::size_t steps = std::max<std::size_t>(1, (max_block + q - 1) / q);
  const char* send = static_cast<const char*>(sendbuf);
  char* recv = static_cast<char*>(recvbuf);
  const std::size_t mine = blocks[me_];
  std::vector<char> staging;
  char* out = recv;
  if (overlap(send, count * e, recv, mine * e)) {
    staging.resize(mine * e);
    out = staging.data();
  }
  for (std::size_t t = 0; t < steps; ++t) {
    const std::size_t at = t * q;
    const int h = next_half();
    for (int j = 0; j < n; ++j) {
      if (at < blocks[j]) {
        copy_bytes(region(me_, h) + j * sub, send + (disp[j] + at) * e,
                   std::min(q, blocks[j] - at) * e);
      }
    }
    if (t == 0) {
      first_sync(info, h, signature(3, type, static_cast<int>(op), hash_counts(blocks)));
    } else {
      sync(info);
    }
    if (at < mine) {
      const std::size_t len = std::min(q, mine - at);
      const std::size_t slot = static_cast<std::size_t>(me_) * sub;
      if (n == 1) {
        copy_bytes(out + at * e, region(0, h) + slot, len * e);
        continue;
      }
      reduce(out + at * e, region(0, h) + slot, region(1, h) + slot, len);
      for (int k = 2; k < n; ++k) reduce(out + at * e, out + at * e, region(k, h) + slot, len);
    }
  }
  if (out != recv && mine > 0) copy_bytes(recv, out, mine * e);
}

void ShmGroup::alltoall(const void* sendbuf, const std::vector<std::size_t>& send_splits,
                        void* recvbuf, const std::vector<std::size_t>& recv_splits, DataType type,
                        const char* group) {
  Lock lock(op_mu_);
  std::size_t sent = 0;
  std::size_t received = 0;
  for (std::size_t s : send_splits) sent += s;
  for (std::size_t s : recv_splits) received += s;
  const Op info{"alltoall", group, sent, type};
  enter(info);
  const std::size_t e = size_of(type);
  const int n = size_;
  const std::size_t sub = round_down(region_bytes_ / static_cast<std::size_t>(n), kCacheLine);
  if (sub == 0) {
    fail(info, kGeneric,
         fmt::format("the shared-memory region ({} bytes) is too small for {} ranks", region_bytes_,
                     n),
         -1);
  }
  const auto sdisp = displacements(send_splits);
  const auto rdisp = displacements(recv_splits);
  const CopyFn put = output_copy(received * e);
  const char* send = static_cast<const char*>(sendbuf);
  char* recv = static_cast<char*>(recvbuf);
  std::vector<char> copy;
  if (overlap(send, sent * e, recv, received * e)) {
    copy.assign(send, send + sent * e);
    send = copy.data();
  }
  // Steps: enough for the largest message of any rank, which every rank learns at the first
  // barrier (each publishes its own largest).
  const std::size_t my_max = *std::max_element(send_splits.begin(), send_splits.end()) * e;
  std::size_t steps = 1;
  for (std::size_t t = 0; t < steps; ++t) {
    const std::size_t at = t * sub;
    const int h = next_half();
    for (int j = 0; j < n; ++j) {
      const std::size_t bytes = send_splits[j] * e;
      if (j != me_ && at < bytes) {
        copy_bytes(region(me_, h) + j * sub, send + sdisp[j] * e + at, std::min(sub, bytes - at));
      }
    }
    if (t == 0) {
      ranks_[me_].shared_value[h].store(my_max, std::memory_order_relaxed);
      ranks_[me_].splits_balance[h].store(splits_balance(me_, send_splits, recv_splits),
                                          std::memory_order_relaxed);
      first_sync(info, h, signature(4, type, 0, 0));
      std::size_t max_bytes = 0;
      std::uint64_t balance = 0;
      for (int k = 0; k < n; ++k) {
        max_bytes =
            std::max<std::size_t>(max_bytes,
                                  ranks_[k].shared_value[h].load(std::memory_order_relaxed));
        balance += ranks_[k].splits_balance[h].load(std::memory_order_relaxed);
      }
      if (balance != 0) {
        // Every rank sums the same values: all of them fail here, before any data is read.
        fail(info, kMismatch,
             "the ranks' send_splits and recv_splits disagree: some rank sends another rank a "
             "count that rank does not expect in its recv_splits (build recv_splits with "
             "hora::alltoall_splits())",
             -1);
      }
      steps = std::max<std::size_t>(1, (max_bytes + sub - 1) / sub);
    } else {
      sync(info);
    }
    for (int k = 0; k < n; ++k) {
      const std::size_t bytes = recv_splits[k] * e;
      if (k == me_ || at >= bytes) continue;
      put(recv + rdisp[k] * e + at, region(k, h) + static_cast<std::size_t>(me_) * sub,
          std::min(sub, bytes - at));
    }
  }
  if (send_splits[me_] > 0) {  // disjoint: an overlapping send buffer was copied above
    put(recv + rdisp[me_] * e, send + sdisp[me_] * e, send_splits[me_] * e);
  }
}

void ShmGroup::barrier(const char* group) {
  Lock lock(op_mu_);
  const Op info{"barrier", group};
  enter(info);
  first_sync(info, next_half(), signature(5, DataType::kUInt8, 0, 0));
}

}  // namespace hora::detail::shm
