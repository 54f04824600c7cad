// Forming a rank's Gloo contexts through the rendezvous, without connectFullMesh.
//
// Protocol (every rank of the job runs it once, in init()):
//   1. Create the TCP device and one pair per peer for the global context and for the engine
//      context (a second global context, for the async engine's background thread). Each pair
//      listens on its own port of the device's address; ranks on loopback each use their own
//      address in 127.64.0.0/10 (one ephemeral port range per rank) once the host's ranks would
//      hold more than 4096 listening ports.
//   2. GATHER "hora/mesh/layout" (rdv::Client::gather): this rank's record, once for everyone
//      (runtime/gloo/mesh_record.h: host index, local and cross rank and size, host name, and the
//      address its pairs share), and for each peer j 4 bytes: the ports of its global and engine
//      pairs for j. Each rank receives every record and the ports addressed to it, and rebuilds
//      each peer's pair addresses: O(n) bytes per rank, ~60 per peer (connectFullMesh: O(n^2)).
//   3. From everyone's layout, form the local group (same host index, ordered by local rank) and
//      the cross group (same local rank, ordered by cross rank), checking that the launcher's
//      numbers agree across ranks (else hora::MismatchError). Create their pairs.
//   4. If some rank has a local or cross group, GATHER "hora/mesh/groups": no record; for each
//      peer j the ports of this rank's local and cross pairs for j (0 where j is not in that
//      group).
//   5. Where Gloo carries allreduces (more than one host, or HORA_SHM=0) and the sync policy
//      allows (sync_policy.h; HORA_GLOO_SYNC), create the sync twins of the global, engine and
//      cross contexts. Where Gloo carries allreduces, GATHER "hora/mesh/sync":
//      record = u32 max_bytes of this rank's policy (every rank must agree, else
//      hora::MismatchError); for each peer j the ports of this rank's global, engine and cross
//      sync pairs for j (0 where there is none).
//   6. Connect every pair: global, engine, local, cross, then the sync twins, each in increasing
//      peer order, and switch the twins' pairs to sync mode. Gloo's
//      pair with the lower address waits for the other to connect; with every rank walking
//      peers in the same order no cycle of waits can form (the same argument as Gloo's own
//      connectFullMesh).
// docs/rendezvous.md ("The mesh exchange") has the byte layout.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gloo/transport/device.h>

#include "rendezvous/client.h"
#include "runtime/core/abort_state.h"
#include "runtime/core/world.h"
#include "runtime/gloo/device.h"
#include "runtime/gloo/mesh_context.h"
#include "runtime/gloo/mesh_record.h"
#include "runtime/gloo/sync_policy.h"

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
  // The same groups again on pairs in Gloo's sync mode, for allreduces of at most
  // sync.max_bytes (null when sync.max_bytes is 0). Their pairs' timeout is the job's timeout.
  SyncPolicy sync;
  std::shared_ptr<MeshContext> global_sync;
  std::shared_ptr<MeshContext> engine_sync;
  std::shared_ptr<MeshContext> cross_sync;
  // What the layout exchange told about every rank (by global rank), kept so that a process
  // set (set_mesh.h) forms its contexts on this device with one exchange of ports.
  struct Peer {
    PairAddressBase base;  // where its pairs listen, port aside
    int host_index = 0;
    std::string hostname;
  };
  std::vector<Peer> peers;
};

// Throws hora::Error subclasses naming the step. Every context is registered with `abort` as
// soon as its pairs exist, so the launcher's abort interrupts a connect in progress.
Mesh build_mesh(const WorldInfo& world, rdv::Client& client, AbortState& abort,
                std::chrono::steady_clock::time_point deadline);

}  // namespace hora::detail::gloo
