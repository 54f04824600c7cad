// Forming a rank's Gloo contexts through the rendezvous, without connectFullMesh.
//
// Protocol (every rank of the job runs it once, in init()):
//   1. Create the TCP device and one pair per peer for the global context. Each pair listens on
//      its own port of the device's address.
//   2. Exchange "hora/mesh/layout" (rdv::Client::exchange, one slice per peer): the slice for
//      rank j carries this rank's layout (host index, local and cross rank and size, host name)
//      and the address of this rank's pair for j. Each rank downloads only the column addressed
//      to it: O(n) bytes per rank, where connectFullMesh reads O(n^2).
//   3. From everyone's layout, form the local group (same host index, ordered by local rank) and
//      the cross group (same local rank, ordered by cross rank), checking that the launcher's
//      numbers agree across ranks (else hora::MismatchError). Create their pairs.
//   4. Exchange "hora/mesh/groups": the slice for rank j carries this rank's engine pair address
//      for j (a second global context, for the async engine's background thread) and its local
//      and/or cross pair address for j when j shares that group.
//   5. Connect every pair: global, engine, local, then cross, each in increasing peer order. Gloo's
//      pair with the lower address waits for the other to connect; with every rank walking
//      peers in the same order no cycle of waits can form (the same argument as Gloo's own
//      connectFullMesh).
// Slices are versioned; see mesh.cc for the byte layout.
#pragma once

#include <chrono>
#include <memory>

#include <gloo/transport/device.h>

#include "rendezvous/client.h"
#include "runtime/gloo/device.h"
#include "runtime/gloo/mesh_context.h"
#include "runtime/core/abort_state.h"
#include "runtime/core/world.h"

namespace hora::detail::gloo {

struct Mesh {
  std::shared_ptr<::gloo::transport::Device> device;
  DeviceAddress address;
  // Null when the scope holds this rank alone (collectives on it are local copies).
  std::shared_ptr<MeshContext> global;
  std::shared_ptr<MeshContext> local;
  std::shared_ptr<MeshContext> cross;
  // Every rank again, on pairs of its own: the async engine's thread runs its collectives here,
  // concurrently with the user's blocking ones on `global`.
  std::shared_ptr<MeshContext> engine;
};

// Throws hora::Error subclasses naming the step. Every context is registered with `abort` as
// soon as its pairs exist, so the launcher's abort interrupts a connect in progress.
Mesh build_mesh(const WorldInfo& world, rdv::Client& client, AbortState& abort,
                std::chrono::steady_clock::time_point deadline);

}  // namespace hora::detail::gloo
