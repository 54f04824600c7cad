#include "rendezvous/store.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "common/duration.h"
#include "rendezvous/format.h"
#include "rendezvous/transpose.h"

namespace hora::rdv {

using wire::Bytes;
using wire::Op;
using wire::Status;

namespace {

std::chrono::milliseconds clamp(std::uint64_t ms) {
  return std::chrono::milliseconds(
      std::min<std::uint64_t>(ms, static_cast<std::uint64_t>(Store::kMaxWait.count())));
}

std::string get_timeout_message(const std::string& key, std::chrono::milliseconds t) {
  return fmt::format("get of key '{}' timed out after {}: no rank has set it", key,
                     format_duration(t));
}

// Decodes a request's payload only to check it (requests after an abort are still validated).
void check_payload(Op op, const Bytes& payload) {
  switch (op) {
    case Op::kSet: wire::decode_set(payload); break;
    case Op::kGet:
    case Op::kBarrier: wire::decode_wait(payload); break;
    case Op::kAdd: wire::decode_add(payload); break;
    case Op::kDel: wire::decode_del(payload); break;
    case Op::kExchange: wire::decode_exchange_view(payload); break;
    case Op::kGather: wire::decode_gather_view(payload); break;
    default: break;
  }
}

// A rank that gives up on a barrier or exchange is moved from its present members to `left`;
// the group is forgotten once nobody waits in it.
template <typename Groups, typename Member>
void leave_group(Groups& groups, const std::string& name, int rank, Member member) {
  auto it = groups.find(name);
  if (it == groups.end()) return;
  auto& present = it->second.*member;
  present.erase(rank);
  it->second.left.insert(rank);
  if (present.empty()) groups.erase(it);
}

// A reply whose whole answer is `body` (no header room, no shared GATHER block).
Store::Reply make_reply(Store::ClientId client, Op op, std::uint32_t id, Status status,
                        Bytes body) {
  Store::Reply r;
  r.client = client;
  r.op = op;
  r.id = id;
  r.status = status;
  r.payload = std::move(body);
  return r;
}

}  // namespace

Store::Store(int size) : size_(size) {}

Store::Replies Store::handle(ClientId client, int rank, Op op, std::uint32_t id, Bytes payload,
                             Clock::time_point now) {
  Replies out;
  auto reply = [&](Status status, Bytes body) {
    out.push_back(make_reply(client, op, id, status, std::move(body)));
  };
  if (abort_reason_) {
    // Requests after an abort still get an answer, so no rank blocks on a dead job; the
    // payload is checked anyway, so a malformed one is still rejected.
    check_payload(op, payload);
    reply(Status::kAborted, wire::encode_message(*abort_reason_));
    return out;
  }
  auto wait = [&](WaitKind kind, std::string name, std::chrono::milliseconds timeout) {
    return Wait{kind, client, rank, id, op, std::move(name), timeout, now + timeout};
  };
  switch (op) {
    case Op::kSet: {
      auto m = wire::decode_set(payload);
      kv_[m.key] = std::move(m.value);
      reply(Status::kOk, {});
      wake_getters(out, m.key);
      break;
    }
    case Op::kGet: {
      auto m = wire::decode_wait(payload);
      if (auto it = kv_.find(m.key); it != kv_.end()) {
        reply(Status::kOk, wire::encode_bytes(it->second));
        break;
      }
      auto timeout = clamp(m.timeout_ms);
      if (timeout.count() == 0) {
        reply(Status::kTimeout, wire::encode_message(get_timeout_message(m.key, timeout)));
        break;
      }
      auto token = add_wait(wait(WaitKind::kGet, m.key, timeout));
      get_waiters_[m.key].push_back(token);
      break;
    }
    case Op::kAdd: {
      auto m = wire::decode_add(payload);
      std::int64_t value = 0;
      if (auto it = kv_.find(m.key); it != kv_.end()) {
        if (it->second.size() != 8) {
          reply(Status::kInvalid,
                wire::encode_message(
                    fmt::format("add to key '{}': it holds a {}-byte value, not a counter "
                                "(8 bytes, little-endian int64)",
                                m.key, it->second.size())));
          break;
        }
        value = wire::decode_i64(it->second);  // a counter is stored as its 8 LE bytes
      }
      // Two's-complement wrap-around instead of signed-overflow UB.
      value = static_cast<std::int64_t>(static_cast<std::uint64_t>(value) +
                                        static_cast<std::uint64_t>(m.delta));
      auto stored = wire::encode_i64(value);
      kv_[m.key] = stored;
      reply(Status::kOk, std::move(stored));
      wake_getters(out, m.key);
      break;
    }
    case Op::kDel: {
      auto m = wire::decode_del(payload);
      bool existed = kv_.erase(m.key) > 0;
      reply(Status::kOk, wire::encode_u8(existed ? 1 : 0));
      break;
    }
    case Op::kBarrier: {
      auto m = wire::decode_wait(payload);
      handle_barrier(out, wait(WaitKind::kBarrier, m.key, clamp(m.timeout_ms)));
      break;
    }
    case Op::kExchange: {
      auto m = wire::decode_exchange_view(payload);
      auto w = wait(WaitKind::kExchange, m.name, clamp(m.timeout_ms));
      handle_exchange(out, std::move(w), std::move(payload), std::move(m));
      break;
    }
    case Op::kGather: {
      auto m = wire::decode_gather_view(payload);
      auto w = wait(WaitKind::kGather, m.name, clamp(m.timeout_ms));
      handle_gather(out, std::move(w), std::move(payload), std::move(m));
      break;
    }
    default:
      // The server only passes request ops.
      reply(Status::kInvalid,
            wire::encode_message(fmt::format("{} is not a request", wire::op_name(op))));
      break;
  }
  return out;
}

// A well-formed request the store cannot serve: INVALID with the reason.
void Store::refuse(Replies& out, const Wait& w, const std::string& why) {
  out.push_back(make_reply(w.client, w.op, w.id, Status::kInvalid, wire::encode_message(why)));
}

void Store::handle_barrier(Replies& out, const Wait& w) {
  auto& b = barriers_[w.name];
  if (b.entered.count(w.rank)) {
    return refuse(out, w,
                  fmt::format("rank {} entered barrier '{}' again while already waiting in it",
                              w.rank, w.name));
  }
  b.entered[w.rank] = add_wait(w);
  if (static_cast<int>(b.entered.size()) < size_) return;
  std::vector<std::uint64_t> tokens;
  for (auto& [r, t] : b.entered) tokens.push_back(t);
  barriers_.erase(w.name);
  for (auto t : tokens) complete_wait(out, t, Bytes{});
}

void Store::handle_exchange(Replies& out, Wait w, Bytes payload, wire::ExchangeView m) {
  if (static_cast<int>(m.slices.size()) != size_) {
    return refuse(out, w,
                  fmt::format("exchange '{}': rank {} uploaded {} slices, but the job has {} ranks "
                              "(one slice per rank)",
                              m.name, w.rank, m.slices.size(), size_));
  }
  auto& ex = exchanges_[m.name];
  if (ex.uploads.count(w.rank)) {
    return refuse(out, w,
                  fmt::format("rank {} entered exchange '{}' again while already waiting in it",
                              w.rank, m.name));
  }
  int rank = w.rank;
  auto token = add_wait(std::move(w));
  ex.uploads[rank] = Upload{token, std::move(payload), std::move(m.slices)};
  if (static_cast<int>(ex.uploads.size()) < size_) return;

  // Everyone uploaded: hand each rank its column, copied out of the rows straight into its
  // response frame (header room first). The exchange is forgotten and its rows freed here; the
  // columns are freed as their writes complete.
  Exchange done = std::move(ex);
  exchanges_.erase(m.name);
  std::vector<const Upload*> rows;
  rows.reserve(size_);
  for (const auto& [r, up] : done.uploads) rows.push_back(&up);
  std::vector<std::pair<std::uint64_t, Bytes>> columns;
  columns.reserve(size_);
  for (int r = 0; r < size_; ++r) {
    std::size_t bytes = wire::kHeaderBytes + 4;
    for (const Upload* row : rows) bytes += 4 + row->slices[r].size();
    wire::Writer col;
    col.reserve(bytes);
    col.raw(std::array<std::uint8_t, wire::kHeaderBytes>{});
    col.u32(static_cast<std::uint32_t>(size_));
    for (const Upload* row : rows) col.bytes(row->slices[r]);
    columns.emplace_back(rows[r]->token, col.take());
  }
  rows.clear();
  done.uploads.clear();
  for (auto& [t, column] : columns) {
    Reply answer;
    answer.payload = std::move(column);
    answer.header_room = wire::kHeaderBytes;
    complete_wait(out, t, std::move(answer));
  }
}

void Store::handle_gather(Replies& out, Wait w, Bytes payload, wire::GatherView m) {
  if (static_cast<std::int64_t>(m.count) != size_) {
    return refuse(out, w,
                  fmt::format("gather '{}': rank {} uploaded {} slices, but the job has {} ranks "
                              "(one slice per rank)",
                              m.name, w.rank, m.count, size_));
  }
  auto& g = gathers_[m.name];
  if (g.uploads.count(w.rank)) {
    return refuse(out, w,
                  fmt::format("rank {} entered gather '{}' again while already waiting in it",
                              w.rank, m.name));
  }
  if (!g.uploads.empty() && g.width != m.width) {
    const int first = g.uploads.begin()->first;
    return refuse(out, w,
                  fmt::format("gather '{}': rank {} uploaded slices of {} bytes, but rank {} "
                              "uploaded {}-byte slices (every rank must run the same libhora)",
                              m.name, w.rank, m.width, first, g.width));
  }
  if (g.uploads.empty()) g.width = m.width;
  int rank = w.rank;
  auto token = add_wait(std::move(w));
  g.uploads[rank] = GatherUpload{token, std::move(payload), m.record, m.slices};
  if (static_cast<int>(g.uploads.size()) < size_) return;

  // Everyone uploaded. The records part (count, then every record, compressed) is the same in
  // every answer: built once and shared by all of them; each answer adds only its header room
  // and its column (width, then one slice from every rank). No per-slice allocation.
  Gather done = std::move(g);
  gathers_.erase(m.name);
  const std::size_t width = done.width;
  std::vector<std::span<const std::uint8_t>> records;
  records.reserve(done.uploads.size());
  for (const auto& [r, up] : done.uploads) records.push_back(up.record);
  const auto block = std::make_shared<const Bytes>(wire::encode_gather_records(records));
  std::vector<const std::uint8_t*> rows;  // rows[j]: rank j's slices
  std::vector<std::uint8_t*> columns;     // columns[r]: rank r's, in its answer's tail
  std::vector<std::pair<std::uint64_t, Reply>> answers;
  rows.reserve(size_);
  columns.reserve(size_);
  answers.reserve(size_);
  const std::size_t tail_bytes = 4 + static_cast<std::size_t>(size_) * width;
  const std::shared_ptr<std::uint8_t[]> tails(new std::uint8_t[tail_bytes * size_]);
  const auto w32 = static_cast<std::uint32_t>(width);
  std::uint8_t* at = tails.get();
  for (const auto& [r, up] : done.uploads) {
    rows.push_back(up.slices.data());
    for (int i = 0; i < 4; ++i) at[i] = static_cast<std::uint8_t>(w32 >> (8 * i));
    columns.push_back(at + 4);
    Reply answer;
    answer.payload.resize(wire::kHeaderBytes);
    answer.header_room = wire::kHeaderBytes;
    answer.shared = block;
    answer.columns = tails;
    answer.tail = std::span<const std::uint8_t>(at, tail_bytes);
    answers.emplace_back(up.token, std::move(answer));
    at += tail_bytes;
  }
  transpose_slices(rows, columns, width);
  rows.clear();
  done.uploads.clear();
  for (auto& [t, answer] : answers) complete_wait(out, t, std::move(answer));
}

void Store::wake_getters(Replies& out, const std::string& key) {
  auto it = get_waiters_.find(key);
  if (it == get_waiters_.end()) return;
  auto tokens = std::move(it->second);
  get_waiters_.erase(it);
  const Bytes& value = kv_.at(key);
  for (auto t : tokens) complete_wait(out, t, wire::encode_bytes(value));
}

std::uint64_t Store::add_wait(Wait w) {
  std::uint64_t token = next_token_++;
  deadlines_.emplace(w.deadline, token);
  by_client_[w.client].insert(token);
  waits_.emplace(token, std::move(w));
  return token;
}

// Takes a wait out of the deadline and per-client indexes.
void Store::unindex(std::uint64_t token, const Wait& w) {
  deadlines_.erase({w.deadline, token});
  if (auto c = by_client_.find(w.client); c != by_client_.end()) {
    c->second.erase(token);
    if (c->second.empty()) by_client_.erase(c);
  }
}

// Answers a wait with OK and forgets it. The caller has already taken it out of its
// barrier/exchange/get list.
void Store::complete_wait(Replies& out, std::uint64_t token, Reply answer) {
  auto it = waits_.find(token);
  if (it == waits_.end()) return;
  Wait w = std::move(it->second);
  waits_.erase(it);
  unindex(token, w);
  answer.client = w.client;
  answer.op = w.op;
  answer.id = w.id;
  answer.status = Status::kOk;
  out.push_back(std::move(answer));
}

void Store::complete_wait(Replies& out, std::uint64_t token, Bytes payload) {
  Reply answer;
  answer.payload = std::move(payload);
  complete_wait(out, token, std::move(answer));
}

// Forgets a wait without answering it, taking it out of its barrier/exchange/get list.
void Store::remove_wait(std::uint64_t token) {
  auto it = waits_.find(token);
  if (it == waits_.end()) return;
  Wait& w = it->second;
  switch (w.kind) {
    case WaitKind::kGet: {
      auto g = get_waiters_.find(w.name);
      if (g != get_waiters_.end()) {
        std::erase(g->second, token);
        if (g->second.empty()) get_waiters_.erase(g);
      }
      break;
    }
    case WaitKind::kBarrier: leave_group(barriers_, w.name, w.rank, &Barrier::entered); break;
    case WaitKind::kExchange: leave_group(exchanges_, w.name, w.rank, &Exchange::uploads); break;
    case WaitKind::kGather: leave_group(gathers_, w.name, w.rank, &Gather::uploads); break;
  }
  unindex(token, w);
  waits_.erase(it);
}

// "waiting for ranks 1, 3 of 4", plus "(rank 0 entered but left: ...)" when some did.
template <typename Map>
std::string Store::describe_missing(const Map& present, const std::set<int>& left) const {
  std::vector<int> missing;
  for (int r = 0; r < size_; ++r) {
    if (!present.count(r) && !left.count(r)) missing.push_back(r);
  }
  std::string out = missing.empty() ? std::string("waiting for no rank that never came")
                                    : "waiting for " + format_ranks(missing, size_);
  if (!left.empty()) {
    out += fmt::format(" ({} {} entered but left: timed out or disconnected)",
                       left.size() == 1 ? "rank" : "ranks",
                       format_rank_list(std::vector<int>(left.begin(), left.end())));
  }
  return out;
}

std::string Store::timeout_message(const Wait& w) {
  switch (w.kind) {
    case WaitKind::kGet: return get_timeout_message(w.name, w.timeout);
    case WaitKind::kBarrier: {
      const Barrier& b = barriers_[w.name];
      return fmt::format("barrier '{}' timed out after {} {}", w.name, format_duration(w.timeout),
                         describe_missing(b.entered, b.left));
    }
    case WaitKind::kExchange: {
      const Exchange& e = exchanges_[w.name];
      return fmt::format("exchange '{}' timed out after {} {}", w.name, format_duration(w.timeout),
                         describe_missing(e.uploads, e.left));
    }
    case WaitKind::kGather: {
      const Gather& g = gathers_[w.name];
      return fmt::format("gather '{}' timed out after {} {}", w.name, format_duration(w.timeout),
                         describe_missing(g.uploads, g.left));
    }
  }
  return {};
}

Store::Replies Store::expire(Clock::time_point now) {
  Replies out;
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    std::uint64_t token = deadlines_.begin()->second;
    const Wait& w = waits_.at(token);
    Reply r = make_reply(w.client, w.op, w.id, Status::kTimeout,
                         wire::encode_message(timeout_message(w)));
    remove_wait(token);
    out.push_back(std::move(r));
  }
  return out;
}

std::optional<Store::Clock::time_point> Store::next_deadline() const {
  if (deadlines_.empty()) return std::nullopt;
  return deadlines_.begin()->first;
}

void Store::forget(ClientId client) {
  auto it = by_client_.find(client);
  if (it == by_client_.end()) return;
  auto tokens = it->second;
  for (auto t : tokens) remove_wait(t);
}

bool Store::abort(const std::string& reason) {
  if (abort_reason_) return false;
  abort_reason_ = reason;
  clear();
  return true;
}

void Store::clear() {
  waits_.clear();
  deadlines_.clear();
  by_client_.clear();
  get_waiters_.clear();
  barriers_.clear();
  exchanges_.clear();
  gathers_.clear();
}

Store::Stats Store::stats() const {
  return Stats{kv_.size(), waits_.size(), barriers_.size(), exchanges_.size() + gathers_.size()};
}

}  // namespace hora::rdv
