// The public API of <hora/elastic.h> (docs/elastic.md): a reset waits for the launcher's next
// round (runtime/process/elastic_session.h), shuts the runtime down and initialises it again as
// the round's rank.
#include <hora/elastic.h>
#include <hora/hora.h>

#include <fmt/format.h>

#include "common/duration.h"
#include "runtime/process/elastic_session.h"

namespace hora::elastic {
namespace {

hora::detail::ElasticSession& session() { return hora::detail::ElasticSession::instance(); }

using Clock = std::chrono::steady_clock;

}  // namespace

bool enabled() { return session().enabled(); }

int round() { return session().round(); }

bool reset_pending() { return session().reset_pending(); }

void reset(std::chrono::milliseconds timeout) {
  hora::detail::ElasticSession& s = session();
  if (!s.enabled()) {
    throw UsageError(
        "hora::elastic::reset(): this is not an elastic job (HORA_ELASTIC is not 1); start it "
        "with horarun --min-np, --max-np or --host-discovery-script");
  }
  const int rank = hora::is_initialized() ? hora::rank() : -1;
  const auto deadline = Clock::now() + timeout;
  while (true) {
    const int from = s.round();
    const std::optional<rdv::wire::Reset> next = s.wait_for_newer(deadline);
    if (!next) {
      throw TimeoutError(
          fmt::format("rank {}: the launcher announced no round after round {} within {}; it "
                      "waits for enough hosts up to --elastic-timeout (HORA_ELASTIC_TIMEOUT)",
                      rank, from, hora::format_duration(timeout)),
          rank);
    }
    // The old round's runtime goes first (its GOODBYE tells the old server this rank left on
    // purpose), then the new one is built from the announced numbers.
    hora::shutdown();
    s.adopt(*next);
    try {
      hora::init();
      return;
    } catch (const UsageError&) {
      throw;  // nothing another round would change
    } catch (const MismatchError&) {
      throw;
    } catch (const Error&) {
      // Another worker was lost while this round formed (a peer closed its connection, the
      // round's server aborted, a wait timed out): the launcher announces a newer round once it
      // notices, which may be after this rank did. Wait for it, up to the same deadline.
      if (Clock::now() < deadline) continue;
      throw;
    }
  }
}

void State::commit() {
  save();
  check_host_updates();
}

void State::check_host_updates() {
  if (!enabled()) return;
  // Rank 0 decides, so that every rank raises at the same commit.
  std::vector<std::int32_t> flag{reset_pending() ? 1 : 0};
  hora::broadcast(flag, 0);
  if (flag[0] != 0) {
    throw HostsUpdatedInterrupt(
        fmt::format("rank {}: the launcher announced round {} (hosts were added)", hora::rank(),
                    round() + 1),
        hora::rank());
  }
}

void State::register_reset_callback(std::function<void()> callback) {
  reset_callbacks_.push_back(std::move(callback));
}

void State::on_reset() {
  for (const auto& callback : reset_callbacks_) callback();
}

namespace detail {

void run_loop(State& state, const std::function<void()>& call) {
  bool reset_first = false;
  while (true) {
    if (reset_first) {
      hora::elastic::reset(session().timeout());
      state.on_reset();
    }
    try {
      state.sync();
      call();
      return;
    } catch (const HostsUpdatedInterrupt&) {
      if (!enabled()) throw;
      reset_first = true;  // nothing was lost since the commit that raised it
    } catch (const PeerFailure&) {
      if (!enabled()) throw;
      state.restore();
      reset_first = true;
    } catch (const AbortedError&) {
      if (!enabled()) throw;
      state.restore();
      reset_first = true;
    } catch (const ConnectionError&) {
      if (!enabled()) throw;
      state.restore();
      reset_first = true;
    } catch (const TimeoutError&) {
      // A peer that stopped answering (its host cut off the network): the launcher notices the
      // lost host too (its rendezvous connections time out) and announces the next round.
      if (!enabled()) throw;
      state.restore();
      reset_first = true;
    }
  }
}

}  // namespace detail
}  // namespace hora::elastic
