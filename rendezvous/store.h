// The rendezvous store: the job's keys, the requests waiting on them, barriers, exchanges and the
// abort state. No sockets and no timers: the server (rendezvous/server.cc) feeds it decoded
// requests from authenticated ranks and sends the replies it returns; time is passed in, so a
// unit test drives it with made-up clocks (test/rendezvous/store_test.cc).
//
// Waiting requests (GET on a missing key, BARRIER, EXCHANGE) are parked with a deadline; each
// belongs to the client (connection) that sent it and is dropped with it. A wait ends by being
// satisfied (OK), by its deadline (expire() answers TIMEOUT naming what was missing), or by its
// client going away (forget(): no answer).
//
// Not thread-safe: the server holds it guarded by its io thread (Server::Impl::io_thread_, checked
// by clang: common/thread_annotations.h) and calls it from there only.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "rendezvous/wire.h"

namespace hora::rdv {

class Store {
 public:
  using Clock = std::chrono::steady_clock;
  using ClientId = std::uint64_t;  // chosen by the caller, one per connection

  // One response to send: to `client`, for its request `id` of `op`.
  struct Reply {
    ClientId client = 0;
    wire::Op op = wire::Op::kSet;
    std::uint32_t id = 0;
    wire::Status status = wire::Status::kOk;
    // The op's result (OK) or a message string, after `header_room` leading bytes left free for
    // the frame header (wire::kHeaderBytes in EXCHANGE and GATHER answers, so the server writes
    // the header in place instead of copying the payload into a new frame; else 0). A GATHER
    // answer continues with `shared` (the records, one block for every rank's answer) and
    // `tail` (the rank's column), which lies in `columns`, one block for every rank's column
    // (one allocation instead of one per rank; not zeroed, every byte is written).
    wire::Bytes payload;
    std::size_t header_room = 0;
    std::shared_ptr<const wire::Bytes> shared;
    std::shared_ptr<const std::uint8_t[]> columns;
    std::span<const std::uint8_t> tail;
    // The whole payload, header room left out (a copy: for tests and the rare fallback).
    wire::Bytes body() const {
      wire::Bytes out(payload.begin() + static_cast<std::ptrdiff_t>(header_room), payload.end());
      if (shared) out.insert(out.end(), shared->begin(), shared->end());
      out.insert(out.end(), tail.begin(), tail.end());
      return out;
    }
    // Bytes of the frame on the wire when sent with its header room.
    std::size_t wire_bytes() const {
      return payload.size() + (shared ? shared->size() : 0) + tail.size();
    }
  };
  using Replies = std::vector<Reply>;

  struct Stats {
    std::size_t keys = 0;
    std::size_t waits = 0;
    std::size_t barriers = 0;
    std::size_t exchanges = 0;
  };

  // Longest wait a request may ask for (protects the deadline arithmetic from absurd values).
  static constexpr std::chrono::milliseconds kMaxWait = std::chrono::hours(24 * 7);

  explicit Store(int size);

  // A request (SET, GET, ADD, DEL, BARRIER, EXCHANGE, GATHER) from `rank` over `client`. Returns
  // the replies it produced: none while it waits, one, or one per rank when it completes a barrier
  // or exchange. After abort() every request is answered ABORTED. Throws wire::DecodeError on a
  // malformed payload (the caller rejects the connection).
  Replies handle(ClientId client, int rank, wire::Op op, std::uint32_t id, wire::Bytes payload,
                 Clock::time_point now);

  // TIMEOUT replies for every wait whose deadline is at or before `now`.
  Replies expire(Clock::time_point now);
  // The earliest deadline of a parked wait, if any.
  std::optional<Clock::time_point> next_deadline() const;

  // The client left: its waits are dropped unanswered; barriers and exchanges remember its rank
  // as one that entered but left.
  void forget(ClientId client);

  // Aborts the job: every wait is dropped unanswered (the server tells each rank with ABORT) and
  // later requests get ABORTED. Returns false (and changes nothing) if already aborted.
  bool abort(const std::string& reason);
  const std::optional<std::string>& abort_reason() const { return abort_reason_; }

  // Drops everything (server stop).
  void clear();

  // The value stored under `key`, or null.
  const wire::Bytes* value(const std::string& key) const {
    const auto it = kv_.find(key);
    return it == kv_.end() ? nullptr : &it->second;
  }

  Stats stats() const;

 private:
  enum class WaitKind { kGet, kBarrier, kExchange, kGather };
  struct Wait {
    WaitKind kind;
    ClientId client;
    int rank;
    std::uint32_t id;
    wire::Op op;
    std::string name;
    std::chrono::milliseconds timeout;
    Clock::time_point deadline;
  };
  // A barrier or exchange lives while someone waits in it. `left` are ranks that entered and
  // then gave up (timed out or disconnected) while others still waited: timeout messages name
  // them apart from the ranks that never came.
  struct Barrier {
    std::map<int, std::uint64_t> entered;  // rank -> token
    std::set<int> left;
  };
  // A rank's row: the EXCHANGE payload as received, and views of its slices inside it (moving
  // the payload vector keeps its buffer, so the views stay valid).
  struct Upload {
    std::uint64_t token;
    wire::Bytes payload;
    std::vector<std::span<const std::uint8_t>> slices;
  };
  struct Exchange {
    std::map<int, Upload> uploads;  // rank -> its row
    std::set<int> left;
  };
  // A GATHER upload: the payload as received, with views of its record and fixed-width slices.
  struct GatherUpload {
    std::uint64_t token;
    wire::Bytes payload;
    std::span<const std::uint8_t> record;
    std::span<const std::uint8_t> slices;
  };
  struct Gather {
    std::uint32_t width = 0;  // the first upload's; every other must match
    std::map<int, GatherUpload> uploads;
    std::set<int> left;
  };

  static void refuse(Replies& out, const Wait& w, const std::string& why);
  void handle_barrier(Replies& out, const Wait& w);
  void handle_exchange(Replies& out, Wait w, wire::Bytes payload, wire::ExchangeView m);
  void handle_gather(Replies& out, Wait w, wire::Bytes payload, wire::GatherView m);
  void wake_getters(Replies& out, const std::string& key);
  std::uint64_t add_wait(Wait w);
  // Answers OK with `answer` (its payload, header_room, shared and tail; client, op and id are
  // the wait's).
  void complete_wait(Replies& out, std::uint64_t token, Reply answer);
  void complete_wait(Replies& out, std::uint64_t token, wire::Bytes payload);
  void remove_wait(std::uint64_t token);
  void unindex(std::uint64_t token, const Wait& w);
  std::string timeout_message(const Wait& w);
  template <typename Map>
  std::string describe_missing(const Map& present, const std::set<int>& left) const;

  int size_;
  std::optional<std::string> abort_reason_;
  std::unordered_map<std::string, wire::Bytes> kv_;
  std::uint64_t next_token_ = 1;
  std::unordered_map<std::uint64_t, Wait> waits_;
  std::set<std::pair<Clock::time_point, std::uint64_t>> deadlines_;  // (deadline, token)
  std::unordered_map<ClientId, std::set<std::uint64_t>> by_client_;  // client -> its tokens
  std::unordered_map<std::string, std::vector<std::uint64_t>> get_waiters_;
  std::unordered_map<std::string, Barrier> barriers_;
  std::unordered_map<std::string, Exchange> exchanges_;
  std::unordered_map<std::string, Gather> gathers_;
};

}  // namespace hora::rdv
