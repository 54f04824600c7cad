#include "runtime/engine/engine.h"

#include <pthread.h>

#include <algorithm>
#include <bit>
#include <set>
#include <string_view>

#include <hora/error.h>

#include "common/duration.h"
#include "runtime/core/log.h"
#include "runtime/engine/error_context.h"
#include "runtime/engine/negotiation_message.h"

namespace hora::detail::engine {
namespace {

// Flag bits of word 0 of the cycle's bit vector. Each means "this rank says so"; after the AND
// a flag holds only if every rank said so.
constexpr std::uint64_t kNothingToAnnounce = 1u << 0;
constexpr std::uint64_t kNotStopping = 1u << 1;
constexpr std::uint64_t kIdle = 1u << 2;

// After this many cycles in which every rank was idle, cycles stretch by kIdleBackoff; a
// submission ends a stretched wait at once. A thread that starts waiting for one of its ops
// (synchronize) starts the next cycle at once too, so whatever was submitted before it (a whole
// backward pass of gradients) goes into one cycle: one bit-vector exchange and one fused batch
// per step in the cache's steady state, not one per tensor. Ranks that still sleep just make the
// others wait inside the bit-vector exchange. A world of one never cycles (run_alone()).
constexpr int kIdleCyclesBeforeBackoff = 100;
constexpr int kIdleBackoff = 10;

// The default home of the stall check's warnings: the runtime logger at warning level, so
// HORA_LOG_LEVEL governs them like every other runtime message. One call per block, so lines
// from several threads do not interleave inside it.
void log_warning(const std::string& block) {
  std::string_view text = block;
  while (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  log().warn("{}", text);
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

// The engine whose cycle this thread is running, if any: a completion callback runs inside the
// cycle, and must neither start another cycle nor join the engine thread from there.
thread_local const void* tl_cycling = nullptr;

std::string api_name(OpType type) { return std::string("hora::") + name_of(type) + "_async"; }

std::string describe(const Handle::State& s) {
  return std::string(name_of(s.request.type)) + " " + quoted(s.request.name);
}

}  // namespace

Engine::Engine(Transport& transport, EngineOptions options, WarningSink warnings)
    : transport_(transport),
      options_(std::move(options)),
      rank_(transport.rank()),
      size_(transport.size()),
      who_("rank " + std::to_string(rank_) +
           (options_.hostname.empty() ? std::string() : " on " + options_.hostname)),
      cache_(options_.cache_capacity),
      table_(size_),
      stall_(options_, rank_, warnings ? std::move(warnings) : WarningSink(log_warning)),
      executor_(transport_, options_, timeline_, counters_) {
  Lock lock(alarm_->mu);
  alarm_->engine = this;
}

void Engine::hurry(const Handle::State* waited) {
  {
    Lock lock(mu_);
    hurry_ = true;
    // Only an op still in flight: one that completed meanwhile will never be released again.
    for (const auto& [name, state] : in_flight_) {
      if (state.get() == waited) {
        waited_.insert(waited);
        break;
      }
    }
  }
  wake_.notify_one();
}

Engine::~Engine() {
  shutdown();
  // Threads still inside drive() return as soon as they see the engine stopped.
  Alarm& alarm = *alarm_;
  Lock lock(alarm.mu);
  while (alarm.drivers != 0) alarm.idle.wait(alarm.mu);
  alarm.engine = nullptr;
}

void Engine::drive(const Handle::State* waited) {
  if (tl_cycling == this) {
    // Inside a completion callback of this engine's cycle: the cycle cannot nest.
    hurry(waited);
    return;
  }
  {
    Lock lock(mu_);
    if (!thread_.joinable() || stopped_) {
      // Not started (nothing would take part in the peers' cycles) or stopped (the op has
      // completed or will at once): wait as a deadline would.
      hurry_ = true;
      return;
    }
  }
  for (;;) {
    Lock cycle(cycle_mu_);
    if (waited->done() || !run_cycle()) return;
  }
}

void Engine::start() {
  Lock cycle(cycle_mu_);  // the timeline is the cycles'
  Lock lock(mu_);
  if (thread_.joinable() || stopped_) return;
  started_ = true;
  // HOROVOD_TIMELINE=DYNAMIC (Horovod's "no file yet, start_timeline() later") opens nothing:
  // hora::start_timeline needs no preparation at start.
  if (!options_.timeline_path.empty() && options_.timeline_path != "DYNAMIC" && rank_ == 0) {
    timeline_.open(options_.timeline_path, options_.timeline_mark_cycles);
  }
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "hora-engine");  // named in crash reports and top -H
    if (options_.on_thread_start) options_.on_thread_start();
    loop();
  });
}

void Engine::start_timeline(const std::string& path, bool mark_cycles) {
  if (rank_ != 0) return;
  Lock cycle(cycle_mu_);  // the timeline is the cycles': wait for the one in progress
  if (timeline_.enabled() && timeline_.path() == path) {
    timeline_.set_mark_cycles(mark_cycles);
    return;
  }
  try {
    timeline_.open(path, mark_cycles, "the file_path given to hora::start_timeline");
  } catch (const Error& e) {
    std::string_view why = e.what();
    if (why.starts_with("hora: ")) why.remove_prefix(6);
    throw Error(who_ + ": hora::start_timeline: " + std::string(why), rank_, options_.hostname);
  }
}

void Engine::stop_timeline() {
  if (rank_ != 0) return;
  Lock cycle(cycle_mu_);
  timeline_.close();
}

void Engine::shutdown() {
  std::thread thread;
  bool inside_cycle;
  {
    Lock lock(mu_);
    shutdown_requested_ = true;
    // Called from a completion callback inside a cycle (on the engine thread, a thread that
    // drives it, or in a world of one the submitting thread): the next cycle (alone: the engine
    // thread, once the op is done) sees the flag; joining here would wait for ourselves.
    inside_cycle = (thread_.joinable() && thread_.get_id() == std::this_thread::get_id()) ||
                   tl_cycling == this;
    if (!inside_cycle) thread = std::move(thread_);
  }
  wake_.notify_all();
  if (inside_cycle) return;
  if (thread.joinable()) {
    thread.join();
    return;
  }
  {
    Lock lock(mu_);
    if (started_) {
      // Another thread's shutdown() is joining the engine thread, which tells the peers and
      // stops the engine: return when it has (as a join would).
      while (!stopped_) stopped_cv_.wait(mu_);
      return;
    }
  }
  // Never started: fail whatever was queued.
  Lock cycle(cycle_mu_);
  bool was_stopped;
  {
    Lock lock(mu_);
    was_stopped = stopped_;
  }
  if (!was_stopped) stop(nullptr, "hora::shutdown() was called on this rank");
}

void Engine::validate(const Handle::State& s) const {
  const Request& r = s.request;
  const std::string who = api_name(r.type) + "(" + quoted(r.name) + ")";
  auto fail = [&](const std::string& why) {
    throw UsageError(who + ": " + why, rank_, options_.hostname);
  };
  if (r.name.empty())
    fail("the name is empty; every async op needs a name unique among in-flight ops");
  if (r.name.size() > NegotiationMessage::kMaxNameLength) {
    fail("the name is " + std::to_string(r.name.size()) + " bytes long; at most " +
         std::to_string(NegotiationMessage::kMaxNameLength) + " are allowed");
  }
  if (r.count > 0) {
    bool needs_send = r.type != OpType::kBroadcast;
    bool needs_recv = r.type == OpType::kAllreduce || r.type == OpType::kBroadcast;
    if (needs_send && s.sendbuf == nullptr)
      fail("sendbuf is null but count is " + std::to_string(r.count));
    if (needs_recv && s.recvbuf == nullptr) {
      fail(std::string(r.type == OpType::kBroadcast ? "buffer" : "recvbuf") +
           " is null but count is " + std::to_string(r.count));
    }
  }
  if (r.type == OpType::kReducescatter && s.recvbuf == nullptr &&
      r.count >= static_cast<std::uint64_t>(size_)) {
    fail("recvbuf is null");
  }
  if (r.type == OpType::kBroadcast && (r.root < 0 || r.root >= size_)) {
    fail("root " + std::to_string(r.root) + " is not a rank of this job (ranks 0-" +
         std::to_string(size_ - 1) + ")");
  }
  if (r.type == OpType::kAlltoall && s.send_splits.size() != static_cast<std::size_t>(size_)) {
    fail("send_splits has " + std::to_string(s.send_splits.size()) +
         " entries; it needs one per rank (" + std::to_string(size_) + ")");
  }
  if ((r.type == OpType::kAllgather || r.type == OpType::kAlltoall) && !s.output) {
    fail("no output allocator was given");
  }
}

Handle Engine::submit(std::shared_ptr<Handle::State> state) {
  validate(*state);
  state->submitted = Clock::now();
  if (size_ > 1) {
    state->on_wait = [alarm = alarm_, waited = state.get()] {
      Lock lock(alarm->mu);
      if (alarm->engine != nullptr) alarm->engine->hurry(waited);
    };
    state->drive = [alarm = alarm_, waited = state.get()] {
      Engine* engine;
      {
        Lock lock(alarm->mu);
        engine = alarm->engine;
        if (engine == nullptr) return;
        ++alarm->drivers;
      }
      engine->drive(waited);  // never throws: run_cycle() turns a failure into stop()
      {
        Lock lock(alarm->mu);
        --alarm->drivers;
      }
      alarm->idle.notify_all();
    };
  }
  std::exception_ptr already_stopped;
  bool wake = false;
  {
    Lock lock(mu_);
    const std::string& name = state->request.name;
    if (stopped_) {
      const std::string context = api_name(state->request.type) + "(" + quoted(name) + ")";
      already_stopped =
          stop_reason_
              ? with_context(stop_reason_, context + ": hora's engine has stopped")
              : std::make_exception_ptr(
                    Error(who_ + ": " + context + ": hora was shut down (" + stop_why_ + ")", rank_,
                          options_.hostname));
    } else {
      if (!in_flight_.emplace(name, state).second) {
        throw UsageError(api_name(state->request.type) + "(" + quoted(name) + "): an op named " +
                             quoted(name) + " is still in flight on rank " + std::to_string(rank_) +
                             "; names must be unique among in-flight ops (synchronize the "
                             "earlier one first, or use another name)",
                         rank_, options_.hostname);
      }
      if (size_ > 1) incoming_.push_back(state);
      // Only a stretched idle wait ends at a submission (cycle_due()). Any other wake-up would
      // find nothing to do, and costs the computing threads a context switch per tensor.
      wake = backoff_;
    }
  }
  if (already_stopped) {
    state->complete(already_stopped);
  } else if (size_ == 1) {
    run_alone(state);
  } else if (wake) {
    wake_.notify_one();
  }
  return Handle(state);
}

void Engine::run_alone(const std::shared_ptr<Handle::State>& state) {
  Lock cycle(cycle_mu_);
  // Its completion callback runs inside this op: a shutdown() there must not join the engine
  // thread, which waits for cycle_mu_ to stop the engine. Restored after: run_alone() nests.
  struct Cycling {
    const void* outer = tl_cycling;
    explicit Cycling(const Engine* e) { tl_cycling = e; }
    ~Cycling() { tl_cycling = outer; }
  } cycling(this);
  Response response;
  response.request = state->request;
  if (response.request.type == OpType::kAllgather) response.rank_counts = {state->request.count};
  const auto now = Clock::now();
  std::vector<ReadyOp> ready{ReadyOp{std::move(response), state, now}};
  counters_.negotiated++;
  try {
    executor_.run(ready, [this](ReadyOp& op, std::exception_ptr error) { release(op, error); });
  } catch (...) {
    // The executor completed the op with this error before rethrowing it; in a world of one
    // nothing else depends on it, so the engine keeps serving.
  }
}

void Engine::loop() {
  if (size_ == 1) {
    // A world of one has nobody to agree with: submissions run on their caller's thread
    // (run_alone()), and the transport is theirs alone. This thread must not touch it (an
    // exchange here raced run_alone()'s collectives on the same transport) and only waits for
    // shutdown.
    {
      Lock lock(mu_);
      while (!shutdown_requested_) wake_.wait(mu_);
    }
    Lock cycle(cycle_mu_);
    stop(nullptr, "hora::shutdown() was called on this rank");
    return;
  }
  for (;;) {
    {
      Lock lock(mu_);
      // Timed from the end of the last bit-vector exchange, which every rank leaves at about
      // the same moment: the ranks' ticks stay in phase, so no engine thread waits most of a
      // cycle in the next exchange for a rank that ticks later.
      while (!stopped_ && !cycle_due(Clock::now())) wake_.wait_until(mu_, next_tick_);
      if (stopped_) return;
    }
    Lock cycle(cycle_mu_);
    {
      // A thread that drove the engine meanwhile may have run the cycle this tick was for.
      Lock lock(mu_);
      if (stopped_) return;
      if (!cycle_due(Clock::now())) continue;
    }
    if (!run_cycle()) return;
  }
}

bool Engine::cycle_due(Clock::time_point now) const {
  return now >= next_tick_ || shutdown_requested_ || hurry_ || !waited_.empty() ||
         (backoff_ && !incoming_.empty());
}

bool Engine::run_cycle() {
  {
    Lock lock(mu_);
    if (stopped_) return false;
  }
  std::exception_ptr cause;
  bool go_on = false;
  tl_cycling = this;
  try {
    go_on = cycle();
  } catch (...) {
    cause = std::current_exception();
  }
  tl_cycling = nullptr;
  if (!go_on) {
    stop(cause, end_why_);
    wake_.notify_all();
  }
  return go_on;
}

void Engine::announce_later(const std::string& name) {
  auto it = local_.find(name);
  if (it == local_.end()) return;
  it->second.hit = false;
  to_announce_.push_back(name);
}

void Engine::classify(const std::string& name) {
  Local& l = local_.at(name);
  if (l.state->request.type == OpType::kJoin || table_.any_joined()) {
    // While a rank has joined it sets no cache bits, so a hit would wait for it forever: every
    // op goes through full negotiation, where the joined rank's absence is known.
    to_announce_.push_back(name);
    return;
  }
  ResponseCache::Lookup found = cache_.lookup(l.state->request, rank_);
  switch (found.state) {
    case ResponseCache::State::kHit:
      l.hit = true;
      l.bit = found.bit;
      hits_[found.bit] = name;
      break;
    case ResponseCache::State::kInvalid:
      invalid_[found.bit / 64] |= std::uint64_t{1} << (found.bit % 64);
      to_announce_.push_back(name);
      break;
    case ResponseCache::State::kMiss: to_announce_.push_back(name); break;
  }
}

bool Engine::cycle() {
  const auto cycle_start = Clock::now();
  // The vector covers the bits in use at the start of the cycle: the cache is replicated, so
  // every rank computes the same length.
  const std::size_t bit_limit = cache_.bit_limit();
  const bool stopping = take_submissions(cycle_start, bit_limit);
  const std::size_t w = invalid_.size();
  const std::vector<std::uint64_t> words = exchange_bits(stopping);
  const auto agreed = Clock::now();

  // 3. Shutdown, invalid bits, common hits.
  if ((words[0] & kNotStopping) == 0) {
    end_why_ = stopping ? "hora::shutdown() was called on this rank"
                        : "another rank called hora::shutdown()";
    return false;
  }
  const bool any_invalid = drop_invalid_bits(words, w, bit_limit);
  std::vector<ReadyOp> ready = common_hits(words, w, agreed);

  // 4. Full negotiation, only when some rank has something to announce.
  const bool full = (words[0] & kNothingToAnnounce) == 0 || any_invalid;
  if (full) negotiate(ready);
  if (table_.any_joined() && !hits_.empty()) {
    // A rank joined in this round: the hits still waiting go through negotiation instead.
    for (const auto& [bit, name] : hits_) announce_later(name);
    hits_.clear();
  }
  if ((words[0] & kIdle) != 0 && !full) {
    ++idle_streak_;
  } else {
    idle_streak_ = 0;
  }
  std::vector<std::string> proposals = stall_.check(table_, Clock::now());
  abandon_.insert(abandon_.end(), proposals.begin(), proposals.end());

  // 5. Run, then remember what ran (same order on every rank).
  run_ready(ready, full, cycle_start);
  Lock lock(mu_);
  backoff_ = idle_streak_ >= kIdleCyclesBeforeBackoff;
  next_tick_ = agreed + options_.cycle_time * (backoff_ ? kIdleBackoff : 1);
  return true;
}

bool Engine::take_submissions(Clock::time_point cycle_start, std::size_t bit_limit) {
  std::vector<std::shared_ptr<Handle::State>> fresh;
  bool stopping;
  {
    Lock lock(mu_);
    fresh.swap(incoming_);
    stopping = shutdown_requested_;
    hurry_ = false;
  }
  invalid_.assign((bit_limit + 63) / 64, 0);
  for (auto& s : fresh) {
    const std::string name = s->request.name;
    local_[name] = Local{std::move(s)};
    classify(name);
  }
  // A hit that has waited too long goes through full negotiation, where the stall check can see
  // which ranks are missing.
  if (stall_.enabled()) {
    for (auto it = hits_.begin(); it != hits_.end();) {
      if (stall_.should_uncache(local_.at(it->second).state->submitted, cycle_start)) {
        invalid_[it->first / 64] |= std::uint64_t{1} << (it->first % 64);
        announce_later(it->second);
        it = hits_.erase(it);
      } else {
        ++it;
      }
    }
  }
  return stopping;
}

std::vector<std::uint64_t> Engine::exchange_bits(bool stopping) {
  const std::size_t w = invalid_.size();
  std::vector<std::uint64_t> words(1 + 2 * w, 0);
  std::uint64_t flags = 0;
  if (to_announce_.empty() && abandon_.empty()) flags |= kNothingToAnnounce;
  if (!stopping) flags |= kNotStopping;
  if (local_.empty() && abandon_.empty()) flags |= kIdle;
  words[0] = flags;
  for (const auto& [bit, name] : hits_) words[1 + bit / 64] |= std::uint64_t{1} << (bit % 64);
  for (std::size_t k = 0; k < w; ++k) words[1 + w + k] = ~invalid_[k];
  // The first cycle also checks that every rank uses the same cache capacity and fusion
  // threshold (the replicated cache and the fusion batches depend on them): a value v and ~v
  // both survive the AND unchanged on every rank only if all ranks sent the same v.
  const bool first = counters_.cycles.load() == 0;
  const std::uint64_t agreed_values[] = {options_.cache_capacity, options_.fusion_threshold};
  if (first) {
    for (std::uint64_t v : agreed_values) {
      words.push_back(v);
      words.push_back(~v);
    }
  }
  transport_.allreduce_and(words);
  counters_.cycles++;
  if (!first) return words;
  const char* names[] = {"HORA_CACHE_CAPACITY", "HORA_FUSION_THRESHOLD"};
  for (std::size_t i = 0; i < 2; ++i) {
    const std::size_t at = 1 + 2 * w + 2 * i;
    if (words[at] != agreed_values[i] || words[at + 1] != ~agreed_values[i]) {
      throw UsageError(who_ + ": " + names[i] + " differs between ranks (this rank has " +
                           std::to_string(agreed_values[i]) +
                           "); every rank must use the same value (horarun passes the same "
                           "environment to all ranks)",
                       rank_, options_.hostname);
    }
  }
  return words;
}

bool Engine::drop_invalid_bits(const std::vector<std::uint64_t>& words, std::size_t w,
                               std::size_t bit_limit) {
  bool any_invalid = false;
  for (std::size_t k = 0; k < w; ++k) {
    for (std::uint64_t bits = ~words[1 + w + k]; bits != 0; bits &= bits - 1) {
      std::size_t bit = k * 64 + static_cast<std::size_t>(std::countr_zero(bits));
      if (bit >= bit_limit) continue;  // padding of the last word
      any_invalid = true;
      if (auto it = hits_.find(bit); it != hits_.end()) {
        announce_later(it->second);
        hits_.erase(it);
      }
      cache_.erase(bit);
    }
  }
  return any_invalid;
}

std::vector<ReadyOp> Engine::common_hits(const std::vector<std::uint64_t>& words, std::size_t w,
                                         Clock::time_point agreed) {
  std::vector<ReadyOp> ready;
  for (std::size_t k = 0; k < w; ++k) {
    for (std::uint64_t bits = words[1 + k]; bits != 0; bits &= bits - 1) {
      std::size_t bit = k * 64 + static_cast<std::size_t>(std::countr_zero(bits));
      auto it = hits_.find(bit);
      if (it == hits_.end() || !cache_.contains(bit)) {
        throw Error("hora engine: internal error: cache bit " + std::to_string(bit) +
                        " was set on every rank but is not waiting on rank " +
                        std::to_string(rank_),
                    rank_, options_.hostname);
      }
      Local& l = local_.at(it->second);
      l.hit = false;
      ready.push_back(ReadyOp{cache_.at(bit), l.state, agreed});
      hits_.erase(it);
      counters_.cache_hits++;
    }
  }
  return ready;
}

void Engine::run_ready(std::vector<ReadyOp>& ready, bool full, Clock::time_point cycle_start) {
  if (full || !ready.empty()) timeline_.mark_cycle(cycle_start);
  executor_.run(ready, [this](ReadyOp& op, std::exception_ptr error) {
    cycle_mu_held();  // executor_.run() calls back on this thread
    finish(op, error);
  });
  for (const ReadyOp& op : ready) {
    if (!op.response.ok() || op.response.request.type == OpType::kJoin) continue;
    if (auto evicted = cache_.put(op.response)) {
      if (auto it = hits_.find(*evicted); it != hits_.end()) {
        announce_later(it->second);
        hits_.erase(it);
      }
    }
  }
  if (full || !ready.empty()) timeline_.flush();
}

void Engine::negotiate(std::vector<ReadyOp>& ready) {
  const auto now = Clock::now();
  NegotiationMessage mine;
  for (const std::string& name : to_announce_) {
    const Handle::State& s = *local_.at(name).state;
    auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - s.submitted);
    mine.requests.push_back(
        {s.request, static_cast<std::uint32_t>(std::min<long long>(waited.count(), UINT32_MAX))});
  }
  mine.abandon = std::move(abandon_);
  to_announce_.clear();
  abandon_.clear();

  std::vector<std::vector<std::uint8_t>> all = transport_.allgather_bytes(mine.encode());
  counters_.full_negotiations++;
  if (all.size() != static_cast<std::size_t>(size_)) {
    throw Error("hora engine: the transport's allgather returned " + std::to_string(all.size()) +
                    " messages for " + std::to_string(size_) + " ranks",
                rank_, options_.hostname);
  }
  const auto agreed = Clock::now();
  std::vector<std::string> completed;
  std::set<std::string> seen;
  std::set<std::string> abandon;
  bool joins = false;
  for (int r = 0; r < size_; ++r) {
    NegotiationMessage m = NegotiationMessage::decode(all[static_cast<std::size_t>(r)], r);
    for (const auto& a : m.requests) {
      auto first_seen = r == rank_ ? local_.at(a.request.name).state->submitted
                                   : now - std::chrono::milliseconds(a.waited_ms);
      joins = joins || a.request.type == OpType::kJoin;
      if (table_.add(r, a.request, first_seen) && seen.insert(a.request.name).second) {
        completed.push_back(a.request.name);
      }
    }
    abandon.insert(m.abandon.begin(), m.abandon.end());
  }
  if (joins) {
    // Names that waited only for the ranks that joined now.
    for (const std::string& name : table_.ready_names()) {
      if (seen.insert(name).second) completed.push_back(name);
    }
  }
  // The join last: taking it ends the join, and the others became ready because of it.
  std::stable_partition(completed.begin(), completed.end(),
                        [](const std::string& name) { return name != kJoinName; });
  for (const std::string& name : completed) {
    stall_.forget(name);
    counters_.negotiated++;
    Response response = table_.take(name);
    auto it = local_.find(name);
    if (it != local_.end()) {
      if (it->second.hit) {
        // It waited on a cache bit on this rank, which has joined: it runs now.
        hits_.erase(it->second.bit);
        it->second.hit = false;
      }
      ready.push_back(ReadyOp{std::move(response), it->second.state, agreed});
    } else if (response.ok()) {
      // This rank has joined: it takes part in the others' allreduce with zeros.
      auto zeros = std::make_shared<Handle::State>();
      zeros->request = response.request;
      zeros->zeros.assign(static_cast<std::size_t>(response.bytes()), 0);
      zeros->sendbuf = zeros->zeros.data();
      zeros->recvbuf = zeros->zeros.data();
      zeros->submitted = agreed;
      ready.push_back(ReadyOp{std::move(response), std::move(zeros), agreed});
    }
  }
  for (const std::string& name : abandon) {
    std::optional<MessageTable::Pending> p = table_.erase(name);
    stall_.forget(name);
    if (!p) continue;  // it completed in this very round
    auto it = local_.find(name);
    if (it == local_.end() || it->second.hit) continue;  // this rank never submitted it
    Response failed;
    failed.request = it->second.state->request;
    failed.error_kind = Response::ErrorKind::kStalled;
    failed.error =
        std::string(name_of(failed.request.type)) + " " + quoted(name) +
        " was abandoned by the stall check: rank" + (p->missing.size() == 1 ? " " : "s ") +
        StallInspector::format_ranks(p->missing) + " did not submit it within " +
        format_duration(options_.stall_shutdown_time) + " (submitted by rank" +
        (p->submitted.size() == 1 ? " " : "s ") + StallInspector::format_ranks(p->submitted) +
        "); HORA_STALL_SHUTDOWN_SECONDS sets this limit";
    ready.push_back(ReadyOp{std::move(failed), it->second.state, agreed});
  }
}

void Engine::finish(ReadyOp& op, std::exception_ptr error) {
  local_.erase(op.state->request.name);
  release(op, error);
}

void Engine::release(ReadyOp& op, std::exception_ptr error) {
  const std::string& name = op.state->request.name;
  {
    Lock lock(mu_);
    auto it = in_flight_.find(name);
    if (it != in_flight_.end() && it->second == op.state) in_flight_.erase(it);
    waited_.erase(op.state.get());
  }
  op.state->complete(error);
}

void Engine::stop(std::exception_ptr cause, const std::string& why) {
  std::vector<std::shared_ptr<Handle::State>> victims;
  {
    Lock lock(mu_);
    stopped_ = true;
    stop_reason_ = cause;
    stop_why_ = why;
    for (auto& [name, state] : in_flight_) victims.push_back(state);
    in_flight_.clear();
    waited_.clear();
    incoming_.clear();
  }
  stopped_cv_.notify_all();
  local_.clear();
  hits_.clear();
  to_announce_.clear();
  abandon_.clear();
  for (auto& s : victims) {
    const std::string what = describe(*s);
    std::exception_ptr error =
        cause ? with_context(cause, "hora's engine stopped before " + what + " completed")
              : std::make_exception_ptr(Error(who_ + ": hora was shut down before " + what +
                                                  " completed (" + why +
                                                  "); synchronize every async op before "
                                                  "calling hora::shutdown()",
                                              rank_, options_.hostname));
    s->complete(error);
  }
  timeline_.close();
}

}  // namespace hora::detail::engine
