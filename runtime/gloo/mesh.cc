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

// build_mesh's steps (mesh.h numbers them), each a member over the state they hand on.
class MeshBuilder {
 public:
  MeshBuilder(const WorldInfo& world, rdv::Client& client, AbortState& abort,
              Clock::time_point deadline)
      : world_(world), client_(client), abort_(abort), deadline_(deadline), n_(world.size) {}

  Mesh build() {
    open_device();
    create_world_pairs();  // step 1
    exchange_layout();     // step 2
    make_world_contexts();
    form_groups();           // step 3
    exchange_group_ports();  // step 4
    make_sync_twins();       // step 5
    exchange_sync_ports();
    connect_all();  // step 6
    return finish();
  }

 private:
  static constexpr const char* kStartHint = "raise --start-timeout (HORA_START_TIMEOUT)";

  [[noreturn]] void fail_on(const std::string& why) const {
    throw Error(fmt::format("{}: init(): {}", who(world_), why), world_.rank, world_.hostname);
  }

  // Every context is registered with the abort as soon as its pairs exist, so the launcher's
  // abort interrupts a connect in progress.
  void on_abort(const PendingContext& pending) {
    if (!pending.context) return;
    abort_.on_abort([context = pending.context](const std::string& reason) {
      context->fail("job aborted by launcher: " + reason);
    });
  }

  std::shared_ptr<MeshContext> group_context(const std::vector<int>& members, int my_scope_rank,
                                             std::chrono::milliseconds timeout) const {
    return make_context(members, my_scope_rank, layouts_, mesh_, timeout);
  }

  void open_device() {
    mesh_.sync = read_sync_policy(world_);
    // Sync twins only where Gloo carries allreduces: between hosts, or between every rank with
    // shared memory off. (A one-host job with shared memory would only pay for their pairs.)
    gloo_carries_ = n_ > 1 && (!world_.shm || world_.local_size < n_);
    sync_ = gloo_carries_ && mesh_.sync.max_bytes > 0;
    ensure_fd_limit(world_, sync_);
    mesh_.address = choose_device_address(world_);
    spread_loopback(world_, sync_, mesh_.address);
    mesh_.device = create_device(world_, mesh_.address);
    log().debug("{}: Gloo device on {} ({})", who(world_), mesh_.address.address,
                mesh_.address.reason);
    pair_timeout_ = std::max(std::chrono::milliseconds(200), remaining(deadline_) / 5);
  }

  // Step 1: the global and engine contexts' pairs. Their members' names are filled in after the
  // layout exchange.
  void create_world_pairs() {
    global_transport_ = mesh_.device->createContext(world_.rank, n_);
    global_transport_->setTimeout(pair_timeout_);
    for (int j = 0; j < n_; ++j) {
      if (j != world_.rank) global_transport_->createPair(j);
    }
    if (n_ > 1) {
      engine_transport_ = mesh_.device->createContext(world_.rank, n_);
      engine_transport_->setTimeout(pair_timeout_);
      for (int j = 0; j < n_; ++j) {
        if (j != world_.rank) engine_transport_->createPair(j);
      }
    }
    mine_ = RankRecord{world_.host_index,
                       world_.local_rank,
                       world_.local_size,
                       world_.cross_rank,
                       world_.cross_size,
                       world_.hostname.substr(0, kMaxHostnameBytes),
                       {}};
    bool have_base = false;
    global_ports_ =
        pair_ports(world_, *global_transport_, n_, world_.rank, &mine_.base, &have_base);
    engine_ports_.assign(static_cast<std::size_t>(n_), 0);
    if (engine_transport_) {
      engine_ports_ =
          pair_ports(world_, *engine_transport_, n_, world_.rank, &mine_.base, &have_base);
    }
    if (!have_base) base_without_pairs();
  }

  // A world of one: no pair, so the record carries the device's address with no port.
  void base_without_pairs() {
    sockaddr_storage ss{};
    if (inet_pton(AF_INET, mesh_.address.address.c_str(),
                  &reinterpret_cast<sockaddr_in&>(ss).sin_addr) == 1) {
      ss.ss_family = AF_INET;
    } else if (inet_pton(AF_INET6, mesh_.address.address.c_str(),
                         &reinterpret_cast<sockaddr_in6&>(ss).sin6_addr) == 1) {
      ss.ss_family = AF_INET6;
    }
    mine_.base.sockaddr = ss;
  }

  // Step 2: layout exchange: one record per rank, 4 bytes per peer.
  void exchange_layout() {
    slices_.assign(static_cast<std::size_t>(n_) * kPortSliceBytes, 0);
    for (int j = 0; j < n_; ++j) {
      if (j != world_.rank) put_ports(slices_, j, global_ports_[j], engine_ports_[j]);
    }
    rdv::GatherResult gathered;
    try {
      gathered = client_.gather("hora/mesh/layout", encode_record(mine_), kPortSliceBytes, slices_,
                                remaining(deadline_));
    } catch (...) {
      rethrow_translated(world_, "init(): exchanging Gloo addresses through the rendezvous", abort_,
                         kStartHint);
    }
    layouts_.resize(static_cast<std::size_t>(n_));
    static_cast<RankRecord&>(layouts_[world_.rank]) = mine_;
    for (int j = 0; j < n_; ++j) {
      if (j == world_.rank) continue;
      try {
        static_cast<RankRecord&>(layouts_[j]) = decode_record(gathered.records[j], j);
      } catch (const Error& e) {
        fail_on(e.what());
      }
      const auto [global_port, engine_port] = get_ports(gathered.slice(j));
      if (global_port == 0 || (n_ > 1 && engine_port == 0)) {
        fail_on(
            fmt::format("rank {} sent no Gloo port for this rank (global {}, engine {}); is "
                        "every rank running the same version of libhora?",
                        j, global_port, engine_port));
      }
      Layout& l = layouts_[j];
      l.global_port = global_port;
      l.engine_port = engine_port;
      l.global_address = join_pair_address(l.base, global_port);
      l.engine_address = join_pair_address(l.base, engine_port);
    }
    mesh_.peers.resize(static_cast<std::size_t>(n_));
    for (int j = 0; j < n_; ++j) {
      mesh_.peers[j] = {layouts_[j].base, layouts_[j].host_index, layouts_[j].hostname};
    }
  }

  // The global and engine contexts on the pairs of step 1, now that every peer is known.
  void make_world_contexts() {
    std::vector<MeshPeer> global_peers(static_cast<std::size_t>(n_));
    for (int j = 0; j < n_; ++j) {
      global_peers[j].global_rank = j;
      global_peers[j].hostname = layouts_[j].hostname;
      if (j != world_.rank) {
        global_peers[j].endpoint = format_pair_endpoint(layouts_[j].base, layouts_[j].global_port);
        global_peers[j].gloo_names.push_back(gloo_name_of(layouts_[j].global_address));
      }
    }
    global_.context = std::make_shared<MeshContext>(world_.rank, std::move(global_peers));
    global_.context->attach(mesh_.device, std::move(global_transport_));
    for (int j = 0; j < n_; ++j) global_.peer_addresses.push_back(layouts_[j].global_address);
    on_abort(global_);
    if (!engine_transport_) return;
    std::vector<MeshPeer> peers(static_cast<std::size_t>(n_));
    for (int j = 0; j < n_; ++j) {
      peers[j].global_rank = j;
      peers[j].hostname = layouts_[j].hostname;
    }
    engine_.context = std::make_shared<MeshContext>(world_.rank, std::move(peers));
    engine_.context->attach(mesh_.device, std::move(engine_transport_));
    engine_.peer_addresses.resize(static_cast<std::size_t>(n_));
    for (int j = 0; j < n_; ++j) {
      if (j == world_.rank) continue;
      engine_.peer_addresses[j] = layouts_[j].engine_address;
      engine_.context->describe_peer(j,
                                     format_pair_endpoint(layouts_[j].base,
                                                          layouts_[j].engine_port),
                                     gloo_name_of(layouts_[j].engine_address));
    }
  }

  // Step 3: the local and cross groups, checked against every rank's claims.
  void form_groups() {
    local_members_ = group_members(
        world_, layouts_, "local", job_env::kLocalRank, job_env::kLocalSize,
        [](const Layout& l) { return l.host_index; }, [](const Layout& l) { return l.local_rank; },
        [](const Layout& l) { return l.local_size; });
    cross_members_ = group_members(
        world_, layouts_, "cross", job_env::kCrossRank, job_env::kCrossSize,
        [](const Layout& l) { return l.local_rank; }, [](const Layout& l) { return l.cross_rank; },
        [](const Layout& l) { return l.cross_size; });
    if (local_members_.size() > 1) {
      local_.context = group_context(local_members_, world_.local_rank, pair_timeout_);
    }
    if (cross_members_.size() > 1) {
      cross_.context = group_context(cross_members_, world_.cross_rank, pair_timeout_);
    }
    for (PendingContext* pending : {&engine_, &local_, &cross_}) on_abort(*pending);
    // slot maps a global rank to its scope rank, or -1.
    local_slot_.assign(static_cast<std::size_t>(n_), -1);
    cross_slot_.assign(static_cast<std::size_t>(n_), -1);
    for (std::size_t i = 0; i < local_members_.size(); ++i)
      local_slot_[local_members_[i]] = static_cast<int>(i);
    for (std::size_t i = 0; i < cross_members_.size(); ++i)
      cross_slot_[cross_members_[i]] = static_cast<int>(i);
  }

  // The peer of `pending` at `slot` listens on `port` of rank j's base address; a rank that
  // sends a port for a group this rank does not share with it (or none for one it does)
  // disagrees about the layout.
  void fill_peer(PendingContext& pending, const char* scope, int j, int slot, std::uint16_t port) {
    const bool member = pending.context && slot >= 0;
    if (member != (port != 0)) {
      throw MismatchError(fmt::format("{}: rank {} {} a {} address, but it is {}in this rank's {} "
                                      "group; the ranks disagree about the layout",
                                      who(world_), j, port != 0 ? "sent" : "did not send", scope,
                                      member ? "" : "not ", scope),
                          world_.rank, world_.hostname);
    }
    if (!member) return;
    auto address = join_pair_address(layouts_[j].base, port);
    pending.context->describe_peer(slot, format_pair_endpoint(layouts_[j].base, port),
                                   gloo_name_of(address));
    pending.peer_addresses[slot] = std::move(address);
  }

  // Step 4: group exchange, when some rank has a local or cross group (every rank knows every
  // layout by now, so all of them make the same choice).
  void exchange_group_ports() {
    for (PendingContext* pending : {&local_, &cross_}) {
      if (pending->context) pending->peer_addresses.resize(pending->context->size);
    }
    bool any_group = false;
    for (const Layout& l : layouts_) any_group = any_group || l.local_size > 1 || l.cross_size > 1;
    if (!any_group) return;
    std::fill(slices_.begin(), slices_.end(), 0);
    for (int j = 0; j < n_; ++j) {
      if (j == world_.rank) continue;
      put_ports(slices_, j, port_for(local_, local_slot_[j]), port_for(cross_, cross_slot_[j]));
    }
    rdv::GatherResult gathered;
    try {
      gathered =
          client_.gather("hora/mesh/groups", {}, kPortSliceBytes, slices_, remaining(deadline_));
    } catch (...) {
      rethrow_translated(world_,
                         "init(): exchanging local/cross Gloo addresses through the rendezvous",
                         abort_, kStartHint);
    }
    for (int j = 0; j < n_; ++j) {
      if (j == world_.rank) continue;
      const auto [local_port, cross_port] = get_ports(gathered.slice(j));
      fill_peer(local_, "local", j, local_slot_[j], local_port);
      fill_peer(cross_, "cross", j, cross_slot_[j], cross_port);
    }
  }

  // Step 5: the sync twins of global, engine and cross. Their pairs' timeout is the job's
  // timeout: in sync mode it bounds each read (SO_RCVTIMEO, or the busy-poll loop), which
  // the operations' own timeouts no longer reach. Gloo waits 5x that for them to connect; they
  // connect last, to peers that just connected the other contexts, and the abort ends the wait.
  void make_sync_twins() {
    if (!sync_) return;
    std::vector<int> everyone(static_cast<std::size_t>(n_));
    std::iota(everyone.begin(), everyone.end(), 0);
    global_sync_.context = group_context(everyone, world_.rank, world_.timeout);
    engine_sync_.context = group_context(everyone, world_.rank, world_.timeout);
    if (cross_.context) {
      cross_sync_.context = group_context(cross_members_, world_.cross_rank, world_.timeout);
    }
    for (PendingContext* pending : {&global_sync_, &engine_sync_, &cross_sync_}) {
      if (!pending->context) continue;
      pending->peer_addresses.resize(static_cast<std::size_t>(pending->context->size));
      on_abort(*pending);
    }
  }

  // Where Gloo carries allreduces, every rank checks that all agree on the sync policy, and
  // learns the twins' ports.
  void exchange_sync_ports() {
    if (!gloo_carries_) return;
    std::vector<std::uint8_t> sync_slices(static_cast<std::size_t>(n_) * kSyncSliceBytes, 0);
    for (int j = 0; j < n_; ++j) {
      if (j == world_.rank) continue;
      std::uint8_t* at = sync_slices.data() + static_cast<std::size_t>(j) * kSyncSliceBytes;
      put_u16(at, port_for(global_sync_, j));
      put_u16(at + 2, port_for(engine_sync_, j));
      put_u16(at + 4, port_for(cross_sync_, cross_slot_[j]));
    }
    const auto max_bytes = static_cast<std::uint32_t>(sync_ ? mesh_.sync.max_bytes : 0);
    const std::vector<std::uint8_t> record{static_cast<std::uint8_t>(max_bytes),
                                           static_cast<std::uint8_t>(max_bytes >> 8),
                                           static_cast<std::uint8_t>(max_bytes >> 16),
                                           static_cast<std::uint8_t>(max_bytes >> 24)};
    rdv::GatherResult gathered;
    try {
      gathered = client_.gather("hora/mesh/sync", record, kSyncSliceBytes, sync_slices,
                                remaining(deadline_));
    } catch (...) {
      rethrow_translated(world_, "init(): exchanging sync Gloo addresses through the rendezvous",
                         abort_, kStartHint);
    }
    for (int j = 0; j < n_; ++j) {
      if (j == world_.rank) continue;
      const auto& theirs = gathered.records[j];
      const std::uint32_t their_bytes =
          theirs.size() == 4 ? static_cast<std::uint32_t>(theirs[0] | theirs[1] << 8 |
                                                          theirs[2] << 16 | theirs[3] << 24)
                             : ~0u;
      if (their_bytes != max_bytes) {
        throw MismatchError(
            fmt::format("{}: rank {} ({}) runs allreduces of up to {} bytes on sync Gloo pairs, "
                        "this rank up to {} ({}); every rank must get the same {} and {}",
                        who(world_), j, layouts_[j].hostname, their_bytes, max_bytes,
                        mesh_.sync.reason, kSyncModeVariable, kSyncBytesVariable),
            world_.rank, world_.hostname);
      }
      if (!sync_) continue;
      const std::uint8_t* at = gathered.slice(j).data();
      fill_peer(global_sync_, "global sync", j, j, get_u16(at));
      fill_peer(engine_sync_, "engine sync", j, j, get_u16(at + 2));
      fill_peer(cross_sync_, "cross sync", j, cross_slot_[j], get_u16(at + 4));
    }
  }

  // Step 6: connect, in the same order on every rank. Every context first, then the scans of
  // /proc/self/fd (record_connected_peers(), make_sync()): Gloo's device thread accepts on, and
  // then closes, the listening sockets of every context that is still connecting, and a scan
  // then races those closes (ThreadSanitizer saw fstat() race close() in Pair::handleListening;
  // a descriptor closed and reused in between could name the wrong socket). Once connect() has
  // returned for every pair, the listening sockets are closed.
  void connect_all() {
    const std::pair<PendingContext*, const char*> contexts[] = {{&global_, "global"},
                                                                {&engine_, "engine"},
                                                                {&local_, "local"},
                                                                {&cross_, "cross"}};
    const std::pair<PendingContext*, const char*> sync_contexts[] = {{&global_sync_, "global sync"},
                                                                     {&engine_sync_, "engine sync"},
                                                                     {&cross_sync_, "cross sync"}};
    for (auto [pending, scope] : contexts) {
      if (pending->context)
        connect_context(world_, "init()", scope, *pending, abort_, pair_timeout_ * 5);
    }
    for (auto [pending, scope] : sync_contexts) {
      if (pending->context)
        connect_context(world_, "init()", scope, *pending, abort_, world_.timeout * 5);
    }
    for (auto [pending, scope] : contexts) {
      if (pending->context) pending->context->record_connected_peers();
    }
    for (auto [pending, scope] : sync_contexts) {
      if (!pending->context) continue;
      pending->context->record_connected_peers();
      switch_to_sync(world_, scope, *pending->context, mesh_.sync, abort_);
    }
  }

  Mesh finish() {
    mesh_.global_sync = global_sync_.context;
    mesh_.engine_sync = engine_sync_.context;
    mesh_.cross_sync = cross_sync_.context;
    if (!sync_) {
      if (!gloo_carries_ && mesh_.sync.max_bytes > 0) {
        mesh_.sync.reason = "none: shared memory carries every allreduce of this one-host job";
      }
      mesh_.sync.max_bytes = 0;
      mesh_.sync.busy_poll = false;
    }
    log().debug("{}: allreduces of up to {} bytes on sync Gloo pairs ({})", who(world_),
                mesh_.sync.max_bytes, mesh_.sync.reason);
    if (sync_ && mesh_.sync.oversubscribed) {
      log().warn(
          "{}: {}=busy with {} ranks on {} and {} usable CPUs: every waiting rank spins on a "
          "core the others need, which makes small allreduces slower; use {}=1 (sleeping "
          "reads)",
          who(world_), kSyncModeVariable, world_.local_size, world_.hostname, usable_cpus(),
          kSyncModeVariable);
    }
    mesh_.global = global_.context;
    mesh_.local = local_.context;
    mesh_.cross = cross_.context;
    mesh_.engine = engine_.context;
    log().debug("{}: Gloo mesh connected (global {}, local {}, cross {} ranks)", who(world_), n_,
                local_members_.size(), cross_members_.size());
    return std::move(mesh_);
  }

  const WorldInfo& world_;
  rdv::Client& client_;
  AbortState& abort_;
  const Clock::time_point deadline_;
  const int n_;
  Mesh mesh_;
  bool gloo_carries_ = false;
  bool sync_ = false;
  std::chrono::milliseconds pair_timeout_{0};
  std::shared_ptr<::gloo::transport::Context> global_transport_;
  std::shared_ptr<::gloo::transport::Context> engine_transport_;
  RankRecord mine_;
  std::vector<std::uint16_t> global_ports_;
  std::vector<std::uint16_t> engine_ports_;
  std::vector<std::uint8_t> slices_;  // the port slices of steps 2 and 4
  std::vector<Layout> layouts_;
  std::vector<int> local_members_;
  std::vector<int> cross_members_;
  std::vector<int> local_slot_;
  std::vector<int> cross_slot_;
  PendingContext global_;
  PendingContext engine_;
  PendingContext local_;
  PendingContext cross_;
  PendingContext global_sync_;
  PendingContext engine_sync_;
  PendingContext cross_sync_;
};

}  // namespace

Mesh build_mesh(const WorldInfo& world, rdv::Client& client, AbortState& abort,
                Clock::time_point deadline) {
  return MeshBuilder(world, client, abort, deadline).build();
}

}  // namespace hora::detail::gloo
