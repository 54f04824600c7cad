#include "runtime/gloo/mesh.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gloo/transport/tcp/address.h>
#include <hora/error.h>
#include <hora/types.h>

#include "runtime/core/error_translation.h"
#include "runtime/core/log.h"

namespace hora::detail::gloo {
namespace {

using Clock = std::chrono::steady_clock;
using rdv::Bytes;

// Slice byte layout (little-endian), version 1:
//   layout slice:  u8 version | u32 host_index | u32 local_rank | u32 local_size | u32 cross_rank
//                  | u32 cross_size | u16 n + n bytes host name | u16 n + n bytes Gloo address
//                  (the sender's global pair for the recipient)
//   groups slice:  u8 version | u8 count | count x (u8 scope: 1 local, 2 cross, 3 engine | u16
//                  n + n bytes Gloo address of the sender's pair for the recipient there)
// A Gloo TCP address is gloo::transport::tcp::Address::bytes(): a sockaddr_storage and a
// sequence number, opaque here.
constexpr std::uint8_t kSliceVersion = 1;
constexpr std::uint8_t kLocalRecord = 1;
constexpr std::uint8_t kCrossRecord = 2;
constexpr std::uint8_t kEngineRecord = 3;

class Writer {
 public:
  void u8(std::uint8_t v) { out_.push_back(v); }
  void u16(std::uint16_t v) {
    for (int i = 0; i < 2; ++i) out_.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  void u32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  template <typename Container>
  void blob(const Container& data) {
    u16(static_cast<std::uint16_t>(data.size()));
    out_.insert(out_.end(), data.begin(), data.end());
  }
  Bytes take() { return std::move(out_); }

 private:
  Bytes out_;
};

class Reader {
 public:
  Reader(const Bytes& in, int from) : in_(in), from_(from) {}
  std::uint8_t u8() { need(1); return in_[at_++]; }
  std::uint16_t u16() {
    need(2);
    std::uint16_t v = static_cast<std::uint16_t>(in_[at_] | in_[at_ + 1] << 8);
    at_ += 2;
    return v;
  }
  std::uint32_t u32() {
    need(4);
    std::uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = v << 8 | in_[at_ + i];
    at_ += 4;
    return v;
  }
  std::vector<char> blob() {
    const std::size_t n = u16();
    need(n);
    std::vector<char> out(in_.begin() + at_, in_.begin() + at_ + n);
    at_ += n;
    return out;
  }

 private:
  void need(std::size_t n) {
    if (at_ + n > in_.size()) {
      throw Error(fmt::format("malformed mesh slice from rank {} ({} bytes): is every rank running "
                              "the same version of libhora?",
                              from_, in_.size()));
    }
  }
  const Bytes& in_;
  int from_;
  std::size_t at_ = 0;
};

struct Layout {
  int host_index = 0;
  int local_rank = 0;
  int local_size = 1;
  int cross_rank = 0;
  int cross_size = 1;
  std::string hostname;
  std::vector<char> global_address;  // the sender's pair for this rank
};

// "10.0.0.2:40123" / "[fe80::1]:40123" from Gloo's opaque address bytes.
std::string endpoint_of(const std::vector<char>& bytes) {
  const ::gloo::transport::tcp::Address address(bytes);
  const sockaddr_storage& ss = address.getSockaddr();
  char text[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
    return fmt::format("{}:{}", text, ntohs(in->sin_port));
  }
  if (ss.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
    return fmt::format("[{}]:{}", text, ntohs(in6->sin6_port));
  }
  return "?";
}

std::string gloo_name_of(const std::vector<char>& bytes) {
  const ::gloo::transport::tcp::Address address(bytes);
  // Gloo prints a pair's address with its sequence number ("$n"); errors print the socket
  // address without it. Keep the part before '$' so both match.
  std::string name = address.str();
  return name.substr(0, name.find('$'));
}

std::chrono::milliseconds remaining(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

Bytes encode_layout(const WorldInfo& world, const std::vector<char>& address) {
  Writer w;
  w.u8(kSliceVersion);
  w.u32(static_cast<std::uint32_t>(world.host_index));
  w.u32(static_cast<std::uint32_t>(world.local_rank));
  w.u32(static_cast<std::uint32_t>(world.local_size));
  w.u32(static_cast<std::uint32_t>(world.cross_rank));
  w.u32(static_cast<std::uint32_t>(world.cross_size));
  w.blob(world.hostname.substr(0, 1024));
  w.blob(address);
  return w.take();
}

Layout decode_layout(const Bytes& slice, int from) {
  Reader r(slice, from);
  if (const auto version = r.u8(); version != kSliceVersion) {
    throw Error(fmt::format("rank {} speaks mesh slice version {}, this rank {}: every rank must "
                            "run the same libhora",
                            from, version, kSliceVersion));
  }
  Layout layout;
  layout.host_index = static_cast<int>(r.u32());
  layout.local_rank = static_cast<int>(r.u32());
  layout.local_size = static_cast<int>(r.u32());
  layout.cross_rank = static_cast<int>(r.u32());
  layout.cross_size = static_cast<int>(r.u32());
  const auto name = r.blob();
  layout.hostname.assign(name.begin(), name.end());
  layout.global_address = r.blob();
  return layout;
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

struct PendingContext {
  std::shared_ptr<MeshContext> context;
  std::vector<std::vector<char>> peer_addresses;  // by scope rank: the peer's pair for us
};

std::shared_ptr<MeshContext> make_context(const std::vector<int>& members, int my_scope_rank,
                                          const std::vector<Layout>& layouts, const Mesh& mesh,
                                          std::chrono::milliseconds pair_timeout) {
  std::vector<MeshPeer> peers(members.size());
  for (std::size_t i = 0; i < members.size(); ++i) {
    peers[i].global_rank = members[i];
    peers[i].hostname = layouts[members[i]].hostname;
  }
  auto context = std::make_shared<MeshContext>(my_scope_rank, std::move(peers));
  auto transport = mesh.device->createContext(my_scope_rank, static_cast<int>(members.size()));
  // A pair waits up to 5x this for its peer to connect (Gloo's rule); the operations set their
  // own timeouts. Pairs are created before the context is reachable from the abort path, so
  // the abort hook never races with pair creation.
  transport->setTimeout(pair_timeout);
  for (int i = 0; i < static_cast<int>(members.size()); ++i) {
    if (i != my_scope_rank) transport->createPair(i);
  }
  context->attach(mesh.device, std::move(transport));
  return context;
}

void connect_context(const WorldInfo& world, const char* scope, PendingContext& pending,
                     const AbortState& abort, std::chrono::milliseconds budget) {
  MeshContext& context = *pending.context;
  for (int i = 0; i < context.size; ++i) {
    if (i == context.rank) continue;
    const MeshPeer peer = context.member(i);
    try {
      context.transport().getPair(i)->connect(pending.peer_addresses[i]);
    } catch (...) {
      const std::string step = fmt::format(
          "init(): connecting the {} Gloo pair to rank {} ({}, {})", scope, peer.global_rank,
          peer.hostname, peer.endpoint);
      if (abort.reason()) rethrow_translated(world, step, abort, "");
      std::string why;
      try {
        throw;
      } catch (const std::exception& e) {
        why = e.what();
      }
      const std::string fix = fmt::format(
          "check that {} can reach {} (firewall, or the wrong interface: set it with horarun "
          "--network-interfaces / HORA_IFACE)",
          world.hostname, peer.endpoint);
      if (why.find("timeout") != std::string::npos || why.find("Timed out") != std::string::npos) {
        throw TimeoutError(fmt::format("{}: {} timed out after {} ms: {}; that rank may have died "
                                       "(see its output), or {}; raise --start-timeout "
                                       "(HORA_START_TIMEOUT)",
                                       who(world), step, budget.count(), why, fix),
                           world.rank, world.hostname);
      }
      throw ConnectionError(fmt::format("{}: {} failed: {}; {}", who(world), step, why, fix),
                            world.rank, world.hostname);
    }
  }
  context.record_connected_peers();
}

}  // namespace

Mesh build_mesh(const WorldInfo& world, rdv::Client& client, AbortState& abort,
                Clock::time_point deadline) {
  const std::string start_hint = "raise --start-timeout (HORA_START_TIMEOUT)";
  Mesh mesh;
  mesh.address = choose_device_address(world);
  mesh.device = create_device(world, mesh.address);
  log().debug("{}: Gloo device on {} ({})", who(world), mesh.address.address, mesh.address.reason);

  const auto pair_timeout = std::max(std::chrono::milliseconds(200), remaining(deadline) / 5);
  const int n = world.size;
  std::vector<int> everyone(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) everyone[i] = i;

  // Step 1: the global context's pairs. Its members' names are filled in after the layout
  // exchange, so build it with placeholder layouts first.
  std::vector<Layout> layouts(static_cast<std::size_t>(n));
  layouts[world.rank] = {world.host_index, world.local_rank, world.local_size, world.cross_rank,
                         world.cross_size, world.hostname, {}};

  std::vector<std::vector<char>> my_global(static_cast<std::size_t>(n));
  auto global_transport = mesh.device->createContext(world.rank, n);
  global_transport->setTimeout(pair_timeout);
  for (int j = 0; j < n; ++j) {
    if (j != world.rank) my_global[j] = global_transport->createPair(j)->address().bytes();
  }

  // Step 2: layout exchange.
  std::vector<Bytes> slices(static_cast<std::size_t>(n));
  for (int j = 0; j < n; ++j) {
    if (j != world.rank) slices[j] = encode_layout(world, my_global[j]);
  }
  std::vector<Bytes> column;
  try {
    column = client.exchange("hora/mesh/layout", slices, remaining(deadline));
  } catch (...) {
    rethrow_translated(world, "init(): exchanging Gloo addresses through the rendezvous", abort,
                       start_hint);
  }
  if (static_cast<int>(column.size()) != n) {
    throw Error(fmt::format("{}: init(): the rendezvous exchange returned {} slices for {} ranks",
                            who(world), column.size(), n),
                world.rank, world.hostname);
  }
  for (int j = 0; j < n; ++j) {
    if (j != world.rank) layouts[j] = decode_layout(column[j], j);
  }

  std::vector<MeshPeer> global_peers(static_cast<std::size_t>(n));
  for (int j = 0; j < n; ++j) {
    global_peers[j].global_rank = j;
    global_peers[j].hostname = layouts[j].hostname;
    if (j != world.rank) {
      global_peers[j].endpoint = endpoint_of(layouts[j].global_address);
      global_peers[j].gloo_names.push_back(gloo_name_of(layouts[j].global_address));
    }
  }
  PendingContext global{std::make_shared<MeshContext>(world.rank, std::move(global_peers)), {}};
  global.context->attach(mesh.device, std::move(global_transport));
  for (int j = 0; j < n; ++j) global.peer_addresses.push_back(layouts[j].global_address);
  abort.on_abort([context = global.context](const std::string& reason) {
    context->fail("job aborted by launcher: " + reason);
  });

  // Step 3: groups.
  const auto local_members = group_members(
      world, layouts, "local", "HORA_LOCAL_RANK", "HORA_LOCAL_SIZE",
      [](const Layout& l) { return l.host_index; }, [](const Layout& l) { return l.local_rank; },
      [](const Layout& l) { return l.local_size; });
  const auto cross_members = group_members(
      world, layouts, "cross", "HORA_CROSS_RANK", "HORA_CROSS_SIZE",
      [](const Layout& l) { return l.local_rank; }, [](const Layout& l) { return l.cross_rank; },
      [](const Layout& l) { return l.cross_size; });

  PendingContext local;
  PendingContext cross;
  PendingContext engine;
  if (n > 1) engine.context = make_context(everyone, world.rank, layouts, mesh, pair_timeout);
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

  // Step 4: group exchange. slot_of maps a global rank to its scope rank (or -1).
  std::map<int, int> local_slot;
  std::map<int, int> cross_slot;
  for (std::size_t i = 0; i < local_members.size(); ++i) local_slot[local_members[i]] = static_cast<int>(i);
  for (std::size_t i = 0; i < cross_members.size(); ++i) cross_slot[cross_members[i]] = static_cast<int>(i);
  for (int j = 0; j < n; ++j) {
    slices[j].clear();
    if (j == world.rank) continue;
    Writer w;
    w.u8(kSliceVersion);
    const bool in_local = local.context && local_slot.count(j);
    const bool in_cross = cross.context && cross_slot.count(j);
    const bool in_engine = static_cast<bool>(engine.context);
    w.u8(static_cast<std::uint8_t>(in_local + in_cross + in_engine));
    if (in_engine) {
      w.u8(kEngineRecord);
      w.blob(engine.context->transport().getPair(j)->address().bytes());
    }
    if (in_local) {
      w.u8(kLocalRecord);
      w.blob(local.context->transport().getPair(local_slot[j])->address().bytes());
    }
    if (in_cross) {
      w.u8(kCrossRecord);
      w.blob(cross.context->transport().getPair(cross_slot[j])->address().bytes());
    }
    slices[j] = w.take();
  }
  try {
    column = client.exchange("hora/mesh/groups", slices, remaining(deadline));
  } catch (...) {
    rethrow_translated(world, "init(): exchanging local/cross Gloo addresses through the rendezvous",
                       abort, start_hint);
  }
  for (PendingContext* pending : {&engine, &local, &cross}) {
    if (pending->context) pending->peer_addresses.resize(pending->context->size);
  }
  auto fill_peer = [](PendingContext& pending, int slot, const std::vector<char>& address) {
    pending.peer_addresses[slot] = address;
    pending.context->describe_peer(slot, endpoint_of(address), gloo_name_of(address));
  };
  for (int j = 0; j < n; ++j) {
    if (j == world.rank) continue;
    Reader r(column.at(j), j);
    if (const auto version = r.u8(); version != kSliceVersion) {
      throw Error(fmt::format("{}: rank {} speaks mesh slice version {}, this rank {}", who(world),
                              j, version, kSliceVersion),
                  world.rank, world.hostname);
    }
    const int count = r.u8();
    for (int k = 0; k < count; ++k) {
      const auto scope = r.u8();
      const auto address = r.blob();
      if (scope == kEngineRecord && engine.context) {
        fill_peer(engine, j, address);
      } else if (scope == kLocalRecord && local.context && local_slot.count(j)) {
        fill_peer(local, local_slot[j], address);
      } else if (scope == kCrossRecord && cross.context && cross_slot.count(j)) {
        fill_peer(cross, cross_slot[j], address);
      } else {
        throw MismatchError(fmt::format("{}: rank {} sent a {} address, but it is not in this "
                                        "rank's {} group; the ranks disagree about the layout",
                                        who(world), j, scope == kLocalRecord ? "local" : "cross",
                                        scope == kLocalRecord ? "local" : "cross"),
                            world.rank, world.hostname);
      }
    }
  }

  // Step 5: connect, in the same order on every rank.
  connect_context(world, "global", global, abort, pair_timeout * 5);
  if (engine.context) connect_context(world, "engine", engine, abort, pair_timeout * 5);
  if (local.context) connect_context(world, "local", local, abort, pair_timeout * 5);
  if (cross.context) connect_context(world, "cross", cross, abort, pair_timeout * 5);

  mesh.global = global.context;
  mesh.local = local.context;
  mesh.cross = cross.context;
  mesh.engine = engine.context;
  log().debug("{}: Gloo mesh connected (global {}, local {}, cross {} ranks)", who(world), n,
              local_members.size(), cross_members.size());
  return mesh;
}

}  // namespace hora::detail::gloo
