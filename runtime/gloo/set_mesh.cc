#include "runtime/gloo/set_mesh.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>
#include <hora/error.h>

#include "runtime/core/error_translation.h"
#include "runtime/core/log.h"
#include "runtime/gloo/mesh_steps.h"

namespace hora::detail::gloo {
namespace {

constexpr std::size_t kSliceBytes = 4;

}  // namespace

Mesh form_set_mesh(const Mesh& job, const WorldInfo& world, const std::vector<int>& members,
                   bool member, rdv::Client& client, AbortState& abort,
                   std::chrono::steady_clock::time_point deadline) {
  const char* call = "add_process_set()";
  const int job_size = static_cast<int>(job.peers.size());
  const int me = member ? members[world.rank] : world.rank;  // this rank in the job
  Mesh mesh;
  mesh.device = job.device;
  mesh.address = job.address;
  mesh.sync.max_bytes = 0;
  mesh.sync.reason = "none: process sets run every allreduce on asynchronous pairs";
  mesh.peers = job.peers;
  const int n = static_cast<int>(members.size());
  const bool pairs = member && n > 1;
  const auto pair_timeout = std::max(std::chrono::milliseconds(200), remaining(deadline) / 5);
  auto hostname_of = [&](int rank) { return job.peers[rank].hostname; };
  PendingContext global;
  PendingContext engine;
  if (pairs) {
    global.context = make_group_context(members, world.rank, hostname_of, job.device, pair_timeout);
    engine.context = make_group_context(members, world.rank, hostname_of, job.device, pair_timeout);
    for (PendingContext* pending : {&global, &engine}) {
      abort.on_abort([context = pending->context](const std::string& reason) {
        context->fail("job aborted by launcher: " + reason);
      });
    }
  }
  std::vector<std::uint8_t> slices(static_cast<std::size_t>(job_size) * kSliceBytes, 0);
  if (pairs) {
    for (int i = 0; i < n; ++i) {
      if (i == world.rank) continue;
      std::uint8_t* at = slices.data() + static_cast<std::size_t>(members[i]) * kSliceBytes;
      put_u16(at, port_for(global, i));
      put_u16(at + 2, port_for(engine, i));
    }
  }
  const std::string name = fmt::format("hora/pset/{}/mesh", world.set_id);
  rdv::GatherResult gathered;
  try {
    gathered = client.gather(name, {}, kSliceBytes, slices, remaining(deadline));
  } catch (...) {
    rethrow_translated(world,
                       fmt::format("{}: exchanging the process set's Gloo addresses through the "
                                   "rendezvous ({})",
                                   call, name),
                       abort,
                       "every rank of the job must call add_process_set() with the same "
                       "ranks, in the same order; or raise HORA_TIMEOUT_SECONDS");
  }
  if (!pairs) return mesh;
  for (PendingContext* pending : {&global, &engine}) {
    pending->peer_addresses.resize(static_cast<std::size_t>(n));
  }
  for (int i = 0; i < n; ++i) {
    if (i == world.rank) continue;
    const int j = members[i];
    const std::uint8_t* at = gathered.slice(j).data();
    const std::uint16_t ports[2] = {get_u16(at), get_u16(at + 2)};
    if (ports[0] == 0 || ports[1] == 0) {
      throw MismatchError(fmt::format("{}: {}: rank {} ({}) sent no Gloo port for process set {}; "
                                      "every rank must add the same process sets, with the same "
                                      "ranks, in the same order",
                                      who(world), call, j, job.peers[j].hostname, world.set_id),
                          me, world.hostname);
    }
    PendingContext* contexts[2] = {&global, &engine};
    for (int k = 0; k < 2; ++k) {
      auto address = join_pair_address(job.peers[j].base, ports[k]);
      contexts[k]->context->describe_peer(i, format_pair_endpoint(job.peers[j].base, ports[k]),
                                          gloo_name_of(address));
      contexts[k]->peer_addresses[i] = std::move(address);
    }
  }
  connect_context(world, call, "process set", global, abort, pair_timeout * 5);
  connect_context(world, call, "process set engine", engine, abort, pair_timeout * 5);
  // No record_connected_peers() here (init() does it): it scans /proc/self/fd, and by now
  // Gloo's device thread may be closing the pairs of a set that another rank removed (its end
  // saw the close), which ThreadSanitizer reports as a race on those descriptors. A peer of a
  // set is named in errors by its listening address; one whose connection this rank accepted
  // may then be named by host only (the connection's own port is not learned).
  mesh.global = global.context;
  mesh.engine = engine.context;
  log().debug("{}: process set {} connected ({} ranks)", who(world), world.set_id, n);
  return mesh;
}

}  // namespace hora::detail::gloo
