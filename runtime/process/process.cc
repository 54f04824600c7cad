#include "runtime/process/process.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <hora/error.h>

#include "rendezvous/hmac.h"

#include "runtime/core/error_translation.h"
#include "runtime/core/world.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/engine_options.h"
#include "runtime/engine/transport.h"
#include "runtime/process/crash_report.h"
#include "runtime/process/elastic_session.h"
#include "runtime/process/runtime.h"

namespace hora::detail {
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

void shutdown_at_exit() {
  // A program that returns from main() without hora::shutdown() still leaves cleanly: the
  // launcher sees a goodbye, not a dropped connection. The goodbye says it came from here, so
  // that a non-zero exit code (exit(1) after init) still makes this rank the failed one.
  try {
    Process::instance().shutdown(/*at_exit=*/true);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hora: shutdown at exit failed: %s\n", e.what());
  }
}

}  // namespace

Process& Process::instance() {
  // Never destroyed: its destructor must not run during static destruction, after other
  // libraries' state is gone (the atexit shutdown needs the Process).
  static Process* const process = new Process;
  return *process;
}

void Process::init() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (runtime_) return;
  ignore_sigpipe_if_default();
  // In an elastic job the round's assignment (after a reset) overrides the environment's
  // numbers, and the round's own secret authenticates to the round's server (docs/elastic.md).
  ElasticSession& elastic = ElasticSession::instance();
  const auto elastic_deadline = std::chrono::steady_clock::now() + elastic.timeout();
  std::shared_ptr<Runtime> runtime;
  while (!runtime) {
    WorldInfo world =
        world_from_environment(elastic.lookup([](const char* name) { return std::getenv(name); }));
    if (elastic.enabled()) {
      world.secret = rdv::round_secret(world.secret, static_cast<std::uint32_t>(elastic.round()));
    }
    install_crash_report(fmt::format("rank {} ({}, pid {})", world.rank,
                                     world.hostname.empty() ? "this host" : world.hostname,
                                     static_cast<long>(::getpid())));
    try {
      // The launcher's RESET frames go to the process-wide elastic session.
      runtime = std::make_shared<Runtime>(std::move(world), [](const rdv::wire::Reset& reset) {
        ElasticSession::instance().announce(reset);
      });
    } catch (const UsageError&) {
      throw;
    } catch (const Error&) {
      // An elastic worker (a new one too, at its first init()) whose round broke while it
      // formed (another worker was lost: a connection reset, the round's server aborted) joins
      // the next round the launcher announces instead of failing, up to HORA_ELASTIC_TIMEOUT
      // (the launcher announces it once it notices, which may be after this worker did).
      if (!elastic.enabled()) throw;
      const auto next = elastic.wait_for_newer(elastic_deadline);
      if (!next) throw;
      elastic.adopt(*next);
    }
  }

  // The async engine: its thread cycles with every other rank's from now on (the first cycle
  // waits for all of them), on the Gloo context reserved for it.
  std::unique_ptr<engine::Transport> transport;
  std::shared_ptr<engine::Engine> eng;
  try {
    transport = runtime->make_engine_transport();
    auto options = engine::EngineOptions::from_environment();
    options.hostname = runtime->world().hostname;
    options.on_thread_start = install_alt_signal_stack;
    eng = std::make_shared<engine::Engine>(*transport, std::move(options));
    eng->start();
  } catch (...) {
    eng.reset();
    transport.reset();
    throw;  // `runtime` leaves the job on the way out
  }
  engine_ = std::move(eng);
  engine_transport_ = std::move(transport);
  runtime_ = std::move(runtime);
  sets_.clear();
  next_set_id_ = 1;
  if (!atexit_registered_) {
    atexit_registered_ = true;
    std::atexit(shutdown_at_exit);
  }
}

void Process::shutdown(bool at_exit) {
  std::shared_ptr<Runtime> runtime;
  std::shared_ptr<engine::Engine> engine;
  std::unique_ptr<engine::Transport> transport;
  std::map<int, ProcessSetState> sets;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    runtime = std::move(runtime_);
    engine = std::move(engine_);
    transport = std::move(engine_transport_);
    sets = std::move(sets_);
    sets_.clear();
  }
  // Before anything its peers could notice (a stopped engine, closed connections), the launcher
  // learns that this process is exiting.
  if (at_exit && runtime) runtime->goodbye_at_exit();
  // Process sets first: their Runtimes borrow the job's device and rendezvous connection.
  for (auto& [id, set] : sets) stop_set(set);
  if (!runtime) return;
  // Stopping the engine waits for its thread's last cycle, which may need the other ranks
  // (bounded by their timeout), so it runs without mutex_ held. Submissions racing with it hold
  // their own shared_ptr and complete with the shutdown error.
  if (engine) engine->shutdown();
  engine.reset();
  transport.reset();  // after the engine: it calls the transport until shutdown() returns
  // Calls holding `runtime` elsewhere now throw "called after hora::shutdown()"; the last one
  // destroys it.
  runtime->shutdown();
}

bool Process::initialized() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return runtime_ != nullptr;
}

std::shared_ptr<Runtime> Process::runtime(const char* what) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!runtime_) throw UsageError(fmt::format("hora::{} called before hora::init()", what));
  return runtime_;
}

std::shared_ptr<engine::Engine> Process::engine() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return engine_;
}

const std::string& Process::hostname(const char* what) const {
  // hora::hostname() returns a reference, which must outlive the Runtime it came from: the
  // names are kept (one entry per distinct name, never freed) rather than pointing into it.
  static std::mutex names_mutex;
  static auto* const names = new std::set<std::string>;
  const std::string name = runtime(what)->world().hostname;
  std::lock_guard<std::mutex> lock(names_mutex);
  return *names->insert(name).first;
}

void Process::stop_set(ProcessSetState& set) {
  if (set.engine) set.engine->shutdown();
  set.engine.reset();
  set.transport.reset();
  if (set.runtime) set.runtime->shutdown();
  set.runtime.reset();
}

int Process::add_process_set(std::vector<int> ranks) {
  std::lock_guard<std::mutex> call(sets_call_mutex_);
  auto job = runtime("add_process_set()");
  const WorldInfo& world = job->world();
  std::sort(ranks.begin(), ranks.end());
  auto refuse = [&](const std::string& why) {
    return UsageError(fmt::format("{}: hora::add_process_set([{}]): {}", who(world),
                                  fmt::join(ranks, ", "), why),
                      world.rank, world.hostname);
  };
  if (ranks.empty()) throw refuse("a process set needs at least one rank");
  if (ranks.front() < 0 || ranks.back() >= world.size) {
    throw refuse(fmt::format("rank {} is not a rank of this job (0..{})",
                             ranks.front() < 0 ? ranks.front() : ranks.back(), world.size - 1));
  }
  for (std::size_t i = 1; i < ranks.size(); ++i) {
    if (ranks[i] == ranks[i - 1]) throw refuse(fmt::format("rank {} is given twice", ranks[i]));
  }
  if (static_cast<int>(ranks.size()) == world.size) {
    throw refuse("these are all the job's ranks: the global process set (id 0) already holds them");
  }
  int id = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [existing, set] : sets_) {
      if (set.ranks == ranks) {
        throw refuse(fmt::format("process set {} already holds these ranks", existing));
      }
    }
    id = next_set_id_++;
  }
  ProcessSetState state;
  state.ranks = ranks;
  if (std::binary_search(ranks.begin(), ranks.end(), world.rank)) {
    state.runtime = std::make_shared<Runtime>(*job, id, ranks);
    try {
      state.transport = state.runtime->make_engine_transport();
      auto options = engine::EngineOptions::from_environment();
      options.hostname = world.hostname;
      options.on_thread_start = install_alt_signal_stack;
      // The set's rank 0 writes the set's ops beside the job's timeline, never over it.
      if (!options.timeline_path.empty() && options.timeline_path != "DYNAMIC") {
        options.timeline_path += fmt::format(".set{}", id);
      }
      state.engine = std::make_shared<engine::Engine>(*state.transport, std::move(options));
      state.engine->start();
    } catch (...) {
      stop_set(state);
      throw;
    }
    std::weak_ptr<Runtime> weak = state.runtime;
    job->on_abort([weak](const std::string& reason) {
      if (auto set = weak.lock()) set->abort(reason, false);
    });
  } else {
    Runtime::join_process_set(*job, id, ranks);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  sets_[id] = std::move(state);
  return id;
}

void Process::remove_process_set(int id) {
  std::lock_guard<std::mutex> call(sets_call_mutex_);
  auto job = runtime("remove_process_set()");
  const WorldInfo& world = job->world();
  ProcessSetState set;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = sets_.find(id);
    if (id == 0 || it == sets_.end()) {
      throw UsageError(fmt::format("{}: hora::remove_process_set({}): {}", who(world), id,
                                   id == 0 ? "the global process set cannot be removed"
                                           : "no such process set (removed already, or never "
                                             "added)"),
                       world.rank, world.hostname);
    }
    set = std::move(it->second);
    sets_.erase(it);
  }
  stop_set(set);
}

std::vector<int> Process::process_set_ids() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!runtime_) throw UsageError("hora::process_sets() called before hora::init()");
  std::vector<int> ids{0};
  for (const auto& [id, set] : sets_) ids.push_back(id);
  return ids;
}

const Process::ProcessSetState& Process::find_set(const char* what, int id, bool member) const {
  if (!runtime_) throw UsageError(fmt::format("hora::{} called before hora::init()", what));
  const WorldInfo& world = runtime_->world();
  auto it = sets_.find(id);
  if (it == sets_.end()) {
    throw UsageError(fmt::format("{}: hora::{}: no process set {} (removed, or never added; ids "
                                 "come from hora::add_process_set())",
                                 who(world), what, id),
                     world.rank, world.hostname);
  }
  if (member && !it->second.runtime) {
    throw UsageError(fmt::format("{}: hora::{} on process set {}: this rank is not in it (ranks "
                                 "{}); call it on the set's ranks only",
                                 who(world), what, id, fmt::join(it->second.ranks, ", ")),
                     world.rank, world.hostname);
  }
  return it->second;
}

std::vector<int> Process::process_set_ranks(const char* what, int id) const {
  if (id == 0) {
    std::vector<int> all(static_cast<std::size_t>(runtime(what)->world().size));
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
    return all;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  return find_set(what, id, false).ranks;
}

std::shared_ptr<Runtime> Process::runtime(const char* what, int set_id) const {
  if (set_id == 0) return runtime(what);
  std::lock_guard<std::mutex> lock(mutex_);
  return find_set(what, set_id, true).runtime;
}

std::shared_ptr<engine::Engine> Process::engine(const std::string& what, int set_id) const {
  if (set_id == 0) return engine();
  std::lock_guard<std::mutex> lock(mutex_);
  return find_set(what.c_str(), set_id, true).engine;
}

void Process::set_engine_for_test(std::shared_ptr<engine::Engine> engine) {
  std::shared_ptr<engine::Engine> previous;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    previous = std::move(engine_);
    engine_ = std::move(engine);
  }
  // `previous` is released outside the lock: its destructor may shut an engine down.
}

}  // namespace hora::detail
