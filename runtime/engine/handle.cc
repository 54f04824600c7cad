// The public async API (<hora/async.h>), its Handle half: poll, synchronize and what a
// completed op hands back. Engine-level (no Process): the submitting half is runtime/api/async.cc.
#include <hora/async.h>

#include <string>

#include <hora/error.h>

#include "runtime/engine/op_state.h"

namespace hora {
namespace {

const Handle::State& checked(const Handle& handle, const char* fn) {
  if (!handle.valid()) {
    throw UsageError(std::string("hora::") + fn + ": the handle is empty (default-constructed)");
  }
  return *handle.state();
}

}  // namespace

const std::string& Handle::name() const { return checked(*this, "Handle::name").request.name; }

bool poll(const Handle& handle) { return checked(handle, "poll").done(); }

void synchronize(const Handle& handle) {
  const Handle::State& s = checked(handle, "synchronize");
  s.wait();
  if (std::exception_ptr e = s.error()) std::rethrow_exception(e);
}

void synchronize(const Handle& handle, std::chrono::milliseconds timeout) {
  const Handle::State& s = checked(handle, "synchronize");
  if (!s.wait_until(std::chrono::steady_clock::now() + timeout)) {
    throw TimeoutError(
        "hora::synchronize: " + std::string(detail::engine::name_of(s.request.type)) + " '" +
        s.request.name + "' did not complete within " + std::to_string(timeout.count()) +
        " ms; it is still in flight (some rank may not have submitted it yet: "
        "the stall check names missing ranks after HORA_STALL_CHECK_SECONDS)");
  }
  if (std::exception_ptr e = s.error()) std::rethrow_exception(e);
}

const std::vector<std::size_t>& received_counts(const Handle& handle) {
  const Handle::State& s = checked(handle, "received_counts");
  if (!s.done()) {
    throw UsageError("hora::received_counts('" + s.request.name +
                     "'): the op has not completed yet; synchronize it first");
  }
  return s.received_counts;
}

}  // namespace hora
