#include "runtime/process/process.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <set>

#include <fmt/format.h>
#include <hora/error.h>

#include "rendezvous/hmac.h"

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
  // launcher sees a goodbye, not a dropped connection.
  try {
    Process::instance().shutdown();
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
  WorldInfo world =
      world_from_environment(elastic.lookup([](const char* name) { return std::getenv(name); }));
  if (elastic.enabled()) {
    world.secret = rdv::round_secret(world.secret, static_cast<std::uint32_t>(elastic.round()));
  }
  install_crash_report(fmt::format("rank {} ({}, pid {})", world.rank,
                                   world.hostname.empty() ? "this host" : world.hostname,
                                   static_cast<long>(::getpid())));
  auto runtime = std::make_shared<Runtime>(std::move(world));

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
    throw;  // `runtime` leaves the job on the way out
  }
  engine_ = std::move(eng);
  engine_transport_ = std::move(transport);
  runtime_ = std::move(runtime);
  if (!atexit_registered_) {
    atexit_registered_ = true;
    std::atexit(shutdown_at_exit);
  }
}

void Process::shutdown() {
  std::shared_ptr<Runtime> runtime;
  std::shared_ptr<engine::Engine> engine;
  std::unique_ptr<engine::Transport> transport;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    runtime = std::move(runtime_);
    engine = std::move(engine_);
    transport = std::move(engine_transport_);
  }
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
