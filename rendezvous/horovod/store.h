// The key-value store behind Horovod's Gloo HTTP rendezvous, without sockets: one request in,
// one reply out (rendezvous/horovod/http_server.h serves it over HTTP).
//
// The protocol is Horovod's (horovod/common/gloo/http_store.cc on the worker side):
//   PUT    /<scope>/<key>   body stored                      -> 200
//   GET    /<scope>/<key>   the body, or 404 (the worker polls until it is there)
//   DELETE /<scope>/<rank>  rank finished connecting          -> 200
// For a scope of the plan (global, local_<host>, cross_<n>) the scope is cleared once every
// rank of it has sent DELETE (a DELETE counts only from a rank that stored "<rank>" or
// "rank_<rank>" there in this round, once; others are refused 403), and it is closed until the next
// PUT, which starts a new round (hvd.shutdown() then hvd.init(), as an elastic reset does,
// rendezvous again under the same names). For a process-set scope DELETE removes the key named
// <rank>, and the scope goes away when empty (Horovod's own server does the same for scopes it does
// not know the size of). The slot scopes of Horovod's elastic API are keyed by "<host>:<local
// rank>":
//   PUT    /worker_addresses/<slot>  the rank's notification service (hvd.elastic.run) -> 200
//   GET    /rank_and_size/<slot>     "rank,size,local_rank,local_size,cross_rank,cross_size"
// (scope_plan.h). Unlike horovodrun, which clears every scope's DELETE count when any scope
// completes (so a re-init there can meet stale addresses), each scope counts its own.
//
// Elastic jobs (docs/rendezvous.md, "Elastic jobs"): set_elastic(true) makes a GET of
// rank_and_size/<slot> of the current plan answer later (Reply::deferred_slot; the server holds
// the request until the launcher releases it, then answers with rank_and_size_reply() of the
// plan current at that moment); a slot the current plan lacks is answered "-1,..." at once, as
// horovodrun answers a removed worker. begin_round(plan) starts the next round with another plan,
// as horovodrun's rendezvous.init(plan) does: every scope is cleared.
//
// Beyond Horovod's server, the store knows the job's plan: scopes outside it are refused, keys
// must be short names (slot scopes: a slot of the plan), bodies and the number of keys and
// process-set scopes are bounded, so a stray or hostile client cannot grow the launcher's
// memory without limit.
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "rendezvous/horovod/scope_plan.h"

namespace hora::rdv::horovod {

struct StoreLimits {
  static constexpr std::size_t kMaxKeyBytes = 64;
  // "<host>:<local rank>": a DNS name of up to 253 characters, ':', digits.
  static constexpr std::size_t kMaxSlotKeyBytes = 272;
  static constexpr std::size_t kMaxProcessSetScopes = 1024;

  std::size_t max_key_bytes = kMaxKeyBytes;
  // 0: computed from the plan (for_plan()).
  std::size_t max_body_bytes = 0;
  std::size_t max_process_set_scopes = kMaxProcessSetScopes;

  // A Gloo pair address is well under 256 bytes; the largest value a rank stores holds one per
  // peer. Generous for that, small enough to bound memory: 64 KiB + 256 bytes per rank.
  static StoreLimits for_plan(const ScopePlan& plan);
};

enum class Method { kGet, kPut, kDelete, kOther };

struct Reply {
  int status = 200;
  std::string body;
  // Non-empty when the request was refused (status 400/403/405/413): why, for the launcher's
  // log and for the client (sent as the body).
  std::string refusal;
  // Elastic mode: a GET of rank_and_size/<slot> whose answer waits for the launcher; the slot.
  // status and body are then unset.
  std::string deferred_slot;
};

class Store {
 public:
  explicit Store(ScopePlan plan, StoreLimits limits = {});

  // `target` is the request target as received ("/global/rank_0").
  Reply handle(Method method, std::string_view target, std::string body);

  // Elastic mode: rank_and_size GETs of the plan's slots are deferred (see above). Off: they are
  // answered at once from the plan (fixed jobs).
  void set_elastic(bool elastic) { elastic_ = elastic; }
  bool elastic() const { return elastic_; }

  // Starts a new round with `plan` (Horovod's rendezvous.init): every scope is cleared, the
  // closed and reopened counts and global_ranks_seen() start again, and the body limit follows
  // the new plan's size unless it was given. round() counts the calls.
  void begin_round(ScopePlan plan);
  int round() const { return round_; }

  // 200 "rank,size,local_rank,local_size,cross_rank,cross_size" of `slot` in the current plan,
  // "-1,-1,-1,-1,-1,-1" when the plan has no such slot (horovodrun's answer to a removed worker:
  // the worker then raises, never a 404, which Horovod's worker would read as rank 0).
  Reply rank_and_size_reply(std::string_view slot) const;

  // Global ranks that stored their address in `global` (a rank that did has reached hvd.init()).
  const std::set<int>& global_ranks_seen() const { return global_seen_; }
  // A plan scope whose ranks all sent DELETE, and which no PUT has opened again since.
  bool closed(const std::string& scope) const { return closed_.count(scope) != 0; }
  // How many times a closed plan scope was opened again (0: still in its first round).
  int reopened(const std::string& scope) const {
    auto it = rounds_.find(scope);
    return it == rounds_.end() ? 0 : it->second;
  }
  std::size_t max_body_bytes() const { return limits_.max_body_bytes; }
  const ScopePlan& plan() const { return plan_; }

  struct Stats {
    std::size_t scopes = 0;  // scopes holding keys
    std::size_t keys = 0;
    std::size_t bytes = 0;  // keys + values
  };
  Stats stats() const;

 private:
  struct Scope {
    std::map<std::string, std::string> values;
    std::set<int> finished;  // plan scopes: ranks that sent DELETE
  };

  Reply refuse(int status, std::string why) const;
  Reply rank_and_size(Method method, const std::string& key) const;
  Reply put(const std::string& scope_name, const ScopeInfo& info, const std::string& key,
            std::string body, std::string_view target);
  Reply erase(const std::string& scope_name, const ScopeInfo& info, const std::string& key);
  void note_global_key(const std::string& key);

  ScopePlan plan_;
  StoreLimits limits_;
  bool body_limit_from_plan_ = false;
  bool elastic_ = false;
  int round_ = 0;
  std::map<std::string, Scope> scopes_;
  std::set<std::string> closed_;
  std::map<std::string, int> rounds_;  // plan scopes opened again after closing
  std::set<int> global_seen_;
};

}  // namespace hora::rdv::horovod
