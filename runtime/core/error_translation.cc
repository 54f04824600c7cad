#include "runtime/core/error_translation.h"

#include <exception>

#include <fmt/format.h>
#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <hora/error.h>

#include "common/text.h"
#include "rendezvous/errors.h"

namespace hora::detail {

std::string who(const WorldInfo& world) {
  if (world.set_id == 0) return rank_name(world.rank, world.hostname);
  return fmt::format("{} (rank {} of process set {})", rank_name(world.global_rank, world.hostname),
                     world.rank, world.set_id);
}

std::string aborted_message(const WorldInfo& world, const std::string& step,
                            const std::string& reason) {
  return fmt::format("{}: {} failed: job aborted by launcher: {}", who(world), step, reason);
}

void rethrow_translated(const WorldInfo& world, const std::string& step, const AbortState& abort,
                        const std::string& timeout_hint) {
  const int rank = world.rank;
  const std::string& host = world.hostname;
  // An abort explains whatever the step saw (closed sockets, a failed rendezvous request).
  if (auto reason = abort.reason()) {
    throw AbortedError(aborted_message(world, step, *reason), rank, host);
  }
  const std::string server =
      world.launched() ? fmt::format("{}:{}", world.rendezvous_host, world.rendezvous_port)
                       : std::string("(none)");
  try {
    throw;
  } catch (const hora::Error&) {
    throw;
  } catch (const rdv::AbortedError& e) {
    throw AbortedError(aborted_message(world, step, e.what()), rank, host);
  } catch (const rdv::TimeoutError& e) {
    throw TimeoutError(fmt::format("{}: {} timed out: {}{}", who(world), step, e.what(),
                                   timeout_hint.empty() ? "" : "; " + timeout_hint),
                       rank, host);
  } catch (const rdv::AuthError& e) {
    // The rendezvous client's messages already name the server and the step it failed at.
    const std::string why = e.what();
    std::string hint;
    if (why.find("AUTH_TIMEOUT") != std::string::npos) {
      // Not a wrong secret: the rank answered the server's challenge too late.
      hint =
          " (this rank was too slow to answer the server's challenge: the host is overloaded; "
          "horarun waits as long as --start-timeout)";
    } else if (why.find("HORA_SECRET") == std::string::npos) {
      hint =
          " (HORA_SECRET does not match the job's secret: was this rank started by another "
          "horarun?)";
    }
    throw ConnectionError(fmt::format("{}: {}: {}{}", who(world), step, why, hint), rank, host);
  } catch (const rdv::ConnectError& e) {
    const std::string why = e.what();
    throw ConnectionError(
        fmt::format("{}: {}: {}{}", who(world), step, why,
                    why.find("HORA_RENDEZVOUS") != std::string::npos
                        ? ""
                        : fmt::format(" (HORA_RENDEZVOUS={}: is horarun still running, and can "
                                      "this host reach that address?)",
                                      server)),
        rank, host);
  } catch (const rdv::Error& e) {
    throw ConnectionError(fmt::format("{}: {}: rendezvous server {}: {}", who(world), step, server,
                                      e.what()),
                          rank, host);
  } catch (const ::gloo::Exception& e) {
    throw Error(fmt::format("{}: {} failed in Gloo: {}", who(world), step, e.what()), rank, host);
  } catch (const ::gloo::EnforceNotMet& e) {
    throw Error(fmt::format("{}: {} failed a Gloo check: {}", who(world), step, e.what()), rank,
                host);
  } catch (const std::exception& e) {
    throw Error(fmt::format("{}: {} failed: {}", who(world), step, e.what()), rank, host);
  }
}

}  // namespace hora::detail
