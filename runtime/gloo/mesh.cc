#include "runtime/gloo/mesh.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gloo/transport/tcp/address.h>
#include <hora/error.h>
#include <hora/types.h>

#include <sys/resource.h>

#include "common/fd_limit.h"
#include "common/job_environment.h"
#include "runtime/core/error_translation.h"
#include "runtime/core/log.h"
#include "runtime/gloo/mesh_record.h"
#include "runtime/gloo/mesh_steps.h"

namespace hora::detail::gloo {
namespace {

using Clock = std::chrono::steady_clock;
using rdv::Bytes;

// The two exchanges are GATHERs (docs/rendezvous.md): each rank uploads one record and a
// fixed-width slice per peer.
//   "hora/mesh/layout": record = RankRecord (runtime/gloo/mesh_record.h: layout, the base of
//                       the rank's pair addresses); slice for rank j = u16 port of the sender's
//                       global pair for j | u16 port of its engine pair for j.
//   "hora/mesh/groups": empty record; slice for rank j = u16 port of the sender's local pair
//                       for j | u16 port of its cross pair for j, 0 where j is not in that group.
// Ports are little-endian; 0 means "no pair" (a listening port is never 0).
constexpr std::size_t kPortSliceBytes = 4;

struct Layout : RankRecord {
  // The sender's pairs for this rank.
  std::uint16_t global_port = 0;
  std::uint16_t engine_port = 0;
  std::vector<char> global_address;
  std::vector<char> engine_address;
};

void put_ports(std::vector<std::uint8_t>& slices, int to, std::uint16_t first,
               std::uint16_t second) {
  std::uint8_t* at = slices.data() + static_cast<std::size_t>(to) * kPortSliceBytes;
  put_u16(at, first);
  put_u16(at + 2, second);
}

// "hora/mesh/sync": record = u32 max_bytes of the sender's policy; slice for rank j = u16 ports
// of the sender's global, engine and cross sync pairs for j (0: none).
constexpr std::size_t kSyncSliceBytes = 6;

std::pair<std::uint16_t, std::uint16_t> get_ports(std::span<const std::uint8_t> slice) {
  return {get_u16(slice.data()), get_u16(slice.data() + 2)};
}

// Pairs one rank holds: global and engine, local, cross, and with sync contexts their twins of
// global, engine and cross.
std::uint64_t pairs_of_rank(const WorldInfo& world, bool sync) {
  const auto others = static_cast<std::uint64_t>(world.size - 1);
  const auto cross = static_cast<std::uint64_t>(world.cross_size - 1);
  const std::uint64_t pairs = 2 * others + static_cast<std::uint64_t>(world.local_size - 1) + cross;
  return sync ? pairs + 2 * others + cross : pairs;
}

// Ranks whose device address is IPv4 loopback (127.0.0.0/8: every rank on this host) each take
// an address of their own in that block, 127.64.0.0 + local rank, once the host's ranks would
// hold more than kSharedAddressPorts listening ports at once. In this Gloo every pair binds a
// listening port of its own on the device address, and Linux's ephemeral ports (28232 by
// default) are per address: 128 ranks on 127.0.0.1 with 381 pairs each would need 48768 of them
// at once, and binding gets slower as they fill (64 ranks: 9.4 s to start instead of 4.7). One
// address per rank gives each rank the whole range. The kernel still connects from 127.0.0.1
// (the source of the 127/8 route). Small jobs keep 127.0.0.1.
constexpr std::uint64_t kSharedAddressPorts = 4096;

void spread_loopback(const WorldInfo& world, bool sync, DeviceAddress& address) {
  in_addr v4{};
  if (inet_pton(AF_INET, address.address.c_str(), &v4) != 1) return;
  const std::uint32_t host_order = ntohl(v4.s_addr);
  if ((host_order >> 24) != 127 || world.local_rank < 0 || world.local_rank >= (1 << 22)) return;
  const std::uint64_t pairs = pairs_of_rank(world, sync);
  if (static_cast<std::uint64_t>(world.local_size) * pairs <= kSharedAddressPorts) return;
  const std::uint32_t own =
      (127u << 24) + (64u << 16) + static_cast<std::uint32_t>(world.local_rank);
  v4.s_addr = htonl(own);
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &v4, text, sizeof text);
  address.reason = fmt::format(
      "{} on loopback: the rank's own address in 127.64.0.0/10 instead of "
      "{} ({})",
      "local rank " + std::to_string(world.local_rank), address.address, address.reason);
  address.address = text;
}

// Every pair holds a listening socket until it connects, then a connected one: up to two
// descriptors each while the mesh forms. Raises the soft RLIMIT_NOFILE to the hard limit when
// that is not enough, and fails naming the numbers when even the hard limit is too low, instead
// of letting Gloo fail later with "Too many open files" on some pair.
void ensure_fd_limit(const WorldInfo& world, bool sync) {
  const auto n = static_cast<std::uint64_t>(world.size);
  const std::uint64_t pairs = pairs_of_rank(world, sync);
  const std::uint64_t need = 2 * pairs + 64;
  FdLimit limit = fd_limit();
  if (!limit.error.empty() || limit.soft == RLIM_INFINITY || limit.soft >= need) return;
  limit = raise_fd_limit();
  if (limit.soft >= need) return;
  throw UsageError(fmt::format("{}: init(): the Gloo mesh of {} ranks needs up to {} open files "
                               "in each rank ({} pairs), but RLIMIT_NOFILE is {} (hard limit "
                               "{}); raise it (ulimit -n {}) where horarun starts",
                               who(world), n, need, pairs, limit.soft, limit.hard, need),
                   world.rank, world.hostname);
}

// Members of one group, indexed by their rank within it; checks the launcher's numbering.
// `key` selects the ranks that share this rank's group; `scope_rank`/`scope_size` read a
// rank's claimed position and group size.
template <typename Key, typename ScopeRank, typename ScopeSize>
std::vector<int> group_members(const WorldInfo& world, const std::vector<Layout>& layouts,
                               const char* scope, const char* rank_var, const char* size_var,
                               Key key, ScopeRank scope_rank, ScopeSize scope_size) {
  const int my_size = scope_size(layouts[world.rank]);
  std::vector<int> members(static_cast<std::size_t>(my_size), -1);
  std::vector<int> all;
  std::string problem;
  for (int j = 0; j < world.size; ++j) {
    if (key(layouts[j]) != key(layouts[world.rank])) continue;
    all.push_back(j);
    const int position = scope_rank(layouts[j]);
    if (scope_size(layouts[j]) != my_size) {
      problem = fmt::format("rank {} has {}={} but this rank has {}", j, size_var,
                            scope_size(layouts[j]), my_size);
    } else if (position < 0 || position >= my_size || members[position] != -1) {
      problem = fmt::format("rank {} has {}={}, {}", j, rank_var, position,
                            position >= 0 && position < my_size
                                ? fmt::format("already taken by rank {}", members[position])
                                : std::string("out of range"));
    } else {
      members[position] = j;
    }
  }
  if (problem.empty() && static_cast<int>(all.size()) != my_size) {
    problem = fmt::format("{} ranks share it but {}={}", all.size(), size_var, my_size);
  }
  if (!problem.empty()) {
    throw MismatchError(
        fmt::format("{}: the launcher's {} group is inconsistent (ranks {}): {}; every rank must "
                    "get its HORA_* variables from the same horarun",
                    who(world), scope, fmt::join(all, ","), problem),
        world.rank, world.hostname);
  }
  return members;
}

std::shared_ptr<MeshContext> make_context(const std::vector<int>& members, int my_scope_rank,
                                          const std::vector<Layout>& layouts, const Mesh& mesh,
                                          std::chrono::milliseconds pair_timeout) {
  return make_group_context(
      members, my_scope_rank, [&](int rank) { return layouts[rank].hostname; }, mesh.device,
      pair_timeout);
}

// After connect_context(): the twin's pairs leave the device thread (mesh_context.h).
void switch_to_sync(const WorldInfo& world, const char* scope, MeshContext& context,
                    const SyncPolicy& policy, const AbortState& abort) {
  try {
    context.make_sync(policy.busy_poll, world.timeout);
  } catch (...) {
    const std::string step =
        fmt::format("init(): switching the {} sync Gloo pairs to sync mode", scope);
    if (abort.reason()) rethrow_translated(world, step, abort, "");
    throw ConnectionError(fmt::format("{}: {} failed: {}; {}=0 keeps every pair asynchronous",
                                      who(world), step, current_message(), kSyncModeVariable),
                          world.rank, world.hostname);
  }
}

}  // namespace

Mesh build_mesh(const WorldInfo& world, rdv::Client& client, AbortState& abort,
                Clock::time_point deadline) {
  const std::string start_hint = "raise --start-timeout (HORA_START_TIMEOUT)";
  Mesh mesh;
  mesh.sync = read_sync_policy(world);
  // Sync twins only where Gloo carries allreduces: between hosts, or between every rank with
  // shared memory off. (A one-host job with shared memory would only pay for their pairs.)
  const bool gloo_carries = world.size > 1 && (!world.shm || world.local_size < world.size);
  const bool sync = gloo_carries && mesh.sync.max_bytes > 0;
  ensure_fd_limit(world, sync);
  mesh.address = choose_device_address(world);
  spread_loopback(world, sync, mesh.address);
  mesh.device = create_device(world, mesh.address);
  log().debug("{}: Gloo device on {} ({})", who(world), mesh.address.address, mesh.address.reason);

  const auto pair_timeout = std::max(std::chrono::milliseconds(200), remaining(deadline) / 5);
  const int n = world.size;
  auto fail_on = [&](const std::string& why) {
    throw Error(fmt::format("{}: init(): {}", who(world), why), world.rank, world.hostname);
  };

  // Step 1: the global and engine contexts' pairs. Their members' names are filled in after the
  // layout exchange.
  auto global_transport = mesh.device->createContext(world.rank, n);
  global_transport->setTimeout(pair_timeout);
  std::shared_ptr<::gloo::transport::Context> engine_transport;
  for (int j = 0; j < n; ++j) {
    if (j != world.rank) global_transport->createPair(j);
  }
  if (n > 1) {
    engine_transport = mesh.device->createContext(world.rank, n);
    engine_transport->setTimeout(pair_timeout);
    for (int j = 0; j < n; ++j) {
      if (j != world.rank) engine_transport->createPair(j);
    }
  }
  RankRecord mine{world.host_index,
                  world.local_rank,
                  world.local_size,
                  world.cross_rank,
                  world.cross_size,
                  world.hostname.substr(0, kMaxHostnameBytes),
                  {}};
  bool have_base = false;
  const auto global_ports =
      pair_ports(world, *global_transport, n, world.rank, &mine.base, &have_base);
  std::vector<std::uint16_t> engine_ports(static_cast<std::size_t>(n), 0);
  if (engine_transport) {
    engine_ports = pair_ports(world, *engine_transport, n, world.rank, &mine.base, &have_base);
  }
  if (!have_base) {
    // A world of one: no pair, so the record carries the device's address with no port.
    sockaddr_storage ss{};
    if (inet_pton(AF_INET, mesh.address.address.c_str(),
                  &reinterpret_cast<sockaddr_in&>(ss).sin_addr) == 1) {
      ss.ss_family = AF_INET;
    } else if (inet_pton(AF_INET6, mesh.address.address.c_str(),
                         &reinterpret_cast<sockaddr_in6&>(ss).sin6_addr) == 1) {
      ss.ss_family = AF_INET6;
    }
    mine.base.sockaddr = ss;
  }

  // Step 2: layout exchange: one record per rank, 4 bytes per peer.
  std::vector<std::uint8_t> slices(static_cast<std::size_t>(n) * kPortSliceBytes, 0);
  for (int j = 0; j < n; ++j) {
    if (j != world.rank) put_ports(slices, j, global_ports[j], engine_ports[j]);
  }
  rdv::GatherResult gathered;
  try {
    gathered = client.gather("hora/mesh/layout", encode_record(mine), kPortSliceBytes, slices,
                             remaining(deadline));
  } catch (...) {
    rethrow_translated(world, "init(): exchanging Gloo addresses through the rendezvous", abort,
                       start_hint);
  }
  std::vector<Layout> layouts(static_cast<std::size_t>(n));
  static_cast<RankRecord&>(layouts[world.rank]) = mine;
  for (int j = 0; j < n; ++j) {
    if (j == world.rank) continue;
    try {
      static_cast<RankRecord&>(layouts[j]) = decode_record(gathered.records[j], j);
    } catch (const Error& e) {
      fail_on(e.what());
    }
    const auto [global_port, engine_port] = get_ports(gathered.slice(j));
    if (global_port == 0 || (n > 1 && engine_port == 0)) {
      fail_on(
          fmt::format("rank {} sent no Gloo port for this rank (global {}, engine {}); is "
                      "every rank running the same version of libhora?",
                      j, global_port, engine_port));
    }
    layouts[j].global_port = global_port;
    layouts[j].engine_port = engine_port;
    layouts[j].global_address = join_pair_address(layouts[j].base, global_port);
    layouts[j].engine_address = join_pair_address(layouts[j].base, engine_port);
  }
  gathered = {};
  mesh.peers.resize(static_cast<std::size_t>(n));
  for (int j = 0; j < n; ++j) {
    mesh.peers[j] = {layouts[j].base, layouts[j].host_index, layouts[j].hostname};
  }

  std::vector<MeshPeer> global_peers(static_cast<std::size_t>(n));
  for (int j = 0; j < n; ++j) {
    global_peers[j].global_rank = j;
    global_peers[j].hostname = layouts[j].hostname;
    if (j != world.rank) {
      global_peers[j].endpoint = format_pair_endpoint(layouts[j].base, layouts[j].global_port);
      global_peers[j].gloo_names.push_back(gloo_name_of(layouts[j].global_address));
    }
  }
  PendingContext global{std::make_shared<MeshContext>(world.rank, std::move(global_peers)), {}};
  global.context->attach(mesh.device, std::move(global_transport));
  for (int j = 0; j < n; ++j) global.peer_addresses.push_back(layouts[j].global_address);
  abort.on_abort([context = global.context](const std::string& reason) {
    context->fail("job aborted by launcher: " + reason);
  });

  PendingContext engine;
  if (engine_transport) {
    std::vector<MeshPeer> peers(static_cast<std::size_t>(n));
    for (int j = 0; j < n; ++j) {
      peers[j].global_rank = j;
      peers[j].hostname = layouts[j].hostname;
    }
    engine.context = std::make_shared<MeshContext>(world.rank, std::move(peers));
    engine.context->attach(mesh.device, std::move(engine_transport));
    engine.peer_addresses.resize(static_cast<std::size_t>(n));
    for (int j = 0; j < n; ++j) {
      if (j == world.rank) continue;
      engine.peer_addresses[j] = layouts[j].engine_address;
      engine.context->describe_peer(j,
                                    format_pair_endpoint(layouts[j].base, layouts[j].engine_port),
                                    gloo_name_of(layouts[j].engine_address));
    }
  }

  // Step 3: groups.
  const auto local_members = group_members(
      world, layouts, "local", job_env::kLocalRank, job_env::kLocalSize,
      [](const Layout& l) { return l.host_index; }, [](const Layout& l) { return l.local_rank; },
      [](const Layout& l) { return l.local_size; });
  const auto cross_members = group_members(
      world, layouts, "cross", job_env::kCrossRank, job_env::kCrossSize,
      [](const Layout& l) { return l.local_rank; }, [](const Layout& l) { return l.cross_rank; },
      [](const Layout& l) { return l.cross_size; });

  PendingContext local;
  PendingContext cross;
  if (local_members.size() > 1) {
    local.context = make_context(local_members, world.local_rank, layouts, mesh, pair_timeout);
  }
  if (cross_members.size() > 1) {
    cross.context = make_context(cross_members, world.cross_rank, layouts, mesh, pair_timeout);
  }
  for (PendingContext* pending : {&engine, &local, &cross}) {
    if (!pending->context) continue;
    abort.on_abort([context = pending->context](const std::string& reason) {
      context->fail("job aborted by launcher: " + reason);
    });
  }

  // Step 4: group exchange, when some rank has a local or cross group (every rank knows every
  // layout by now, so all of them make the same choice). slot maps a global rank to its scope
  // rank, or -1.
  std::vector<int> local_slot(static_cast<std::size_t>(n), -1);
  std::vector<int> cross_slot(static_cast<std::size_t>(n), -1);
  for (std::size_t i = 0; i < local_members.size(); ++i)
    local_slot[local_members[i]] = static_cast<int>(i);
  for (std::size_t i = 0; i < cross_members.size(); ++i)
    cross_slot[cross_members[i]] = static_cast<int>(i);
  bool any_group = false;
  for (const Layout& l : layouts) any_group = any_group || l.local_size > 1 || l.cross_size > 1;
  if (any_group) {
    std::fill(slices.begin(), slices.end(), 0);
    for (int j = 0; j < n; ++j) {
      if (j == world.rank) continue;
      put_ports(slices, j, port_for(local, local_slot[j]), port_for(cross, cross_slot[j]));
    }
    try {
      gathered =
          client.gather("hora/mesh/groups", {}, kPortSliceBytes, slices, remaining(deadline));
    } catch (...) {
      rethrow_translated(world,
                         "init(): exchanging local/cross Gloo addresses through the rendezvous",
                         abort, start_hint);
    }
  }
  for (PendingContext* pending : {&local, &cross}) {
    if (pending->context) pending->peer_addresses.resize(pending->context->size);
  }
  auto fill_peer = [&](PendingContext& pending, const char* scope, int j, int slot,
                       std::uint16_t port) {
    const bool member = pending.context && slot >= 0;
    if (member != (port != 0)) {
      throw MismatchError(fmt::format("{}: rank {} {} a {} address, but it is {}in this rank's {} "
                                      "group; the ranks disagree about the layout",
                                      who(world), j, port != 0 ? "sent" : "did not send", scope,
                                      member ? "" : "not ", scope),
                          world.rank, world.hostname);
    }
    if (!member) return;
    auto address = join_pair_address(layouts[j].base, port);
    pending.context->describe_peer(slot, format_pair_endpoint(layouts[j].base, port),
                                   gloo_name_of(address));
    pending.peer_addresses[slot] = std::move(address);
  };
  if (any_group) {
    for (int j = 0; j < n; ++j) {
      if (j == world.rank) continue;
      const auto [local_port, cross_port] = get_ports(gathered.slice(j));
      fill_peer(local, "local", j, local_slot[j], local_port);
      fill_peer(cross, "cross", j, cross_slot[j], cross_port);
    }
  }

  // Step 5: the sync twins of global, engine and cross. Their pairs' timeout is the job's
  // timeout: in sync mode it bounds each read (SO_RCVTIMEO, or the busy-poll loop), which
  // the operations' own timeouts no longer reach. Gloo waits 5x that for them to connect; they
  // connect last, to peers that just connected the other contexts, and the abort ends the wait.
  std::vector<int> everyone(static_cast<std::size_t>(n));
  std::iota(everyone.begin(), everyone.end(), 0);
  PendingContext global_sync;
  PendingContext engine_sync;
  PendingContext cross_sync;
  if (sync) {
    global_sync.context = make_context(everyone, world.rank, layouts, mesh, world.timeout);
    engine_sync.context = make_context(everyone, world.rank, layouts, mesh, world.timeout);
    if (cross.context) {
      cross_sync.context =
          make_context(cross_members, world.cross_rank, layouts, mesh, world.timeout);
    }
    for (PendingContext* pending : {&global_sync, &engine_sync, &cross_sync}) {
      if (!pending->context) continue;
      pending->peer_addresses.resize(static_cast<std::size_t>(pending->context->size));
      abort.on_abort([context = pending->context](const std::string& reason) {
        context->fail("job aborted by launcher: " + reason);
      });
    }
  }
  if (gloo_carries) {
    std::vector<std::uint8_t> sync_slices(static_cast<std::size_t>(n) * kSyncSliceBytes, 0);
    for (int j = 0; j < n; ++j) {
      if (j == world.rank) continue;
      std::uint8_t* at = sync_slices.data() + static_cast<std::size_t>(j) * kSyncSliceBytes;
      put_u16(at, port_for(global_sync, j));
      put_u16(at + 2, port_for(engine_sync, j));
      put_u16(at + 4, port_for(cross_sync, cross_slot[j]));
    }
    const auto max_bytes = static_cast<std::uint32_t>(sync ? mesh.sync.max_bytes : 0);
    const std::vector<std::uint8_t> record{static_cast<std::uint8_t>(max_bytes),
                                           static_cast<std::uint8_t>(max_bytes >> 8),
                                           static_cast<std::uint8_t>(max_bytes >> 16),
                                           static_cast<std::uint8_t>(max_bytes >> 24)};
    try {
      gathered = client.gather("hora/mesh/sync", record, kSyncSliceBytes, sync_slices,
                               remaining(deadline));
    } catch (...) {
      rethrow_translated(world, "init(): exchanging sync Gloo addresses through the rendezvous",
                         abort, start_hint);
    }
    for (int j = 0; j < n; ++j) {
      if (j == world.rank) continue;
      const auto& theirs = gathered.records[j];
      const std::uint32_t their_bytes =
          theirs.size() == 4 ? static_cast<std::uint32_t>(theirs[0] | theirs[1] << 8 |
                                                          theirs[2] << 16 | theirs[3] << 24)
                             : ~0u;
      if (their_bytes != max_bytes) {
        throw MismatchError(
            fmt::format("{}: rank {} ({}) runs allreduces of up to {} bytes on sync Gloo pairs, "
                        "this rank up to {} ({}); every rank must get the same {} and {}",
                        who(world), j, layouts[j].hostname, their_bytes, max_bytes,
                        mesh.sync.reason, kSyncModeVariable, kSyncBytesVariable),
            world.rank, world.hostname);
      }
      if (!sync) continue;
      const std::uint8_t* at = gathered.slice(j).data();
      fill_peer(global_sync, "global sync", j, j, get_u16(at));
      fill_peer(engine_sync, "engine sync", j, j, get_u16(at + 2));
      fill_peer(cross_sync, "cross sync", j, cross_slot[j], get_u16(at + 4));
    }
  }

  // Step 6: connect, in the same order on every rank. Every context first, then the scans of
  // /proc/self/fd (record_connected_peers(), make_sync()): Gloo's device thread accepts on, and
  // then closes, the listening sockets of every context that is still connecting, and a scan
  // then races those closes (ThreadSanitizer saw fstat() race close() in Pair::handleListening;
  // a descriptor closed and reused in between could name the wrong socket). Once connect() has
  // returned for every pair, the listening sockets are closed.
  connect_context(world, "init()", "global", global, abort, pair_timeout * 5);
  if (engine.context) connect_context(world, "init()", "engine", engine, abort, pair_timeout * 5);
  if (local.context) connect_context(world, "init()", "local", local, abort, pair_timeout * 5);
  if (cross.context) connect_context(world, "init()", "cross", cross, abort, pair_timeout * 5);
  const std::pair<PendingContext*, const char*> sync_contexts[] = {{&global_sync, "global sync"},
                                                                   {&engine_sync, "engine sync"},
                                                                   {&cross_sync, "cross sync"}};
  for (auto [pending, scope] : sync_contexts) {
    if (pending->context)
      connect_context(world, "init()", scope, *pending, abort, world.timeout * 5);
  }
  for (PendingContext* pending : {&global, &engine, &local, &cross}) {
    if (pending->context) pending->context->record_connected_peers();
  }
  for (auto [pending, scope] : sync_contexts) {
    if (!pending->context) continue;
    pending->context->record_connected_peers();
    switch_to_sync(world, scope, *pending->context, mesh.sync, abort);
  }
  mesh.global_sync = global_sync.context;
  mesh.engine_sync = engine_sync.context;
  mesh.cross_sync = cross_sync.context;
  if (!sync) {
    if (!gloo_carries && mesh.sync.max_bytes > 0) {
      mesh.sync.reason = "none: shared memory carries every allreduce of this one-host job";
    }
    mesh.sync.max_bytes = 0;
    mesh.sync.busy_poll = false;
  }
  log().debug("{}: allreduces of up to {} bytes on sync Gloo pairs ({})", who(world),
              mesh.sync.max_bytes, mesh.sync.reason);
  if (sync && mesh.sync.oversubscribed) {
    log().warn(
        "{}: {}=busy with {} ranks on {} and {} usable CPUs: every waiting rank spins on a "
        "core the others need, which makes small allreduces slower; use {}=1 (sleeping "
        "reads)",
        who(world), kSyncModeVariable, world.local_size, world.hostname, usable_cpus(),
        kSyncModeVariable);
  }

  mesh.global = global.context;
  mesh.local = local.context;
  mesh.cross = cross.context;
  mesh.engine = engine.context;
  log().debug("{}: Gloo mesh connected (global {}, local {}, cross {} ranks)", who(world), n,
              local_members.size(), cross_members.size());
  return mesh;
}

}  // namespace hora::detail::gloo
