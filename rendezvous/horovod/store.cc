#include "rendezvous/horovod/store.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <optional>

namespace hora::rdv::horovod {
namespace {

// Gloo's keys are "<rank>" and "rank_<rank>"; allow a little more, nothing that needs escaping.
bool valid_key(std::string_view key, std::size_t max_bytes) {
  return !key.empty() && key.size() <= max_bytes && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           c == '-' || c == '.' || c == ':';
  });
}

std::optional<int> parse_rank(std::string_view s) {
  int v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

Reply answer(int status, std::string body = {}) {
  Reply r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

std::string_view method_name(Method m) {
  switch (m) {
    case Method::kGet: return "GET";
    case Method::kPut: return "PUT";
    case Method::kDelete: return "DELETE";
    case Method::kOther: break;
  }
  return "this method";
}

}  // namespace

StoreLimits StoreLimits::for_plan(const ScopePlan& plan) {
  StoreLimits l;
  l.max_body_bytes = (64u << 10) + 256u * static_cast<std::size_t>(std::max(plan.world_size, 1));
  return l;
}

Store::Store(ScopePlan plan, StoreLimits limits)
    : plan_(std::move(plan)), limits_(limits), body_limit_from_plan_(limits.max_body_bytes == 0) {
  if (limits_.max_body_bytes == 0)
    limits_.max_body_bytes = StoreLimits::for_plan(plan_).max_body_bytes;
}

void Store::begin_round(ScopePlan plan) {
  plan_ = std::move(plan);
  if (body_limit_from_plan_) limits_.max_body_bytes = StoreLimits::for_plan(plan_).max_body_bytes;
  scopes_.clear();
  closed_.clear();
  rounds_.clear();
  global_seen_.clear();
  ++round_;
}

Reply Store::refuse(int status, std::string why) const {
  Reply r;
  r.status = status;
  r.body = why + "\n";
  r.refusal = std::move(why);
  return r;
}

void Store::note_global_key(const std::string& key) {
  std::string_view k = key;
  if (k.substr(0, 5) == "rank_") k.remove_prefix(5);
  if (auto rank = parse_rank(k); rank && *rank < plan_.world_size) global_seen_.insert(*rank);
}

Reply Store::handle(Method method, std::string_view target, std::string body) {
  if (method == Method::kOther) {
    return refuse(405, "Horovod's rendezvous takes GET, PUT and DELETE only");
  }
  // "/<scope>/<key>", exactly two segments.
  if (target.size() < 4 || target.front() != '/') {
    return refuse(400, fmt::format("malformed target '{}': expected /<scope>/<key>", target));
  }
  const std::string_view path = target.substr(1);
  const std::size_t slash = path.find('/');
  if (slash == std::string_view::npos || slash == 0 ||
      path.find('/', slash + 1) != std::string_view::npos) {
    return refuse(400, fmt::format("malformed target '{}': expected /<scope>/<key>", target));
  }
  const std::string scope_name(path.substr(0, slash));
  const std::string key(path.substr(slash + 1));
  const std::optional<ScopeInfo> info = resolve_scope(plan_, scope_name);
  const bool slot_scope =
      info && (info->kind == ScopeKind::kWorkerAddresses || info->kind == ScopeKind::kRankAndSize);
  const std::size_t max_key = slot_scope ? StoreLimits::kMaxSlotKeyBytes : limits_.max_key_bytes;
  if (!valid_key(key, max_key)) {
    return refuse(400,
                  fmt::format("malformed key in '{}': at most {} characters of [A-Za-z0-9_.:-]",
                              target, max_key));
  }
  if (!info) {
    return refuse(403, fmt::format("scope '{}' is not one of this job's (global, local_<host>, "
                                   "cross_<local rank>, one of those with a process-set "
                                   "suffix, worker_addresses or rank_and_size)",
                                   scope_name));
  }
  switch (info->kind) {
    case ScopeKind::kRankAndSize: return rank_and_size(method, key);
    case ScopeKind::kWorkerAddresses:
      if (find_slot(plan_, key) == nullptr) {
        return refuse(403, fmt::format("'{}' in {}: the key must be <host>:<local rank> of a "
                                       "rank of this job",
                                       key, scope_name));
      }
      break;
    case ScopeKind::kGloo:
    case ScopeKind::kProcessSet: break;
  }

  switch (method) {
    case Method::kGet: {
      auto s = scopes_.find(scope_name);
      if (s == scopes_.end()) return answer(404);
      auto v = s->second.values.find(key);
      if (v == s->second.values.end()) return answer(404);
      return answer(200, v->second);
    }
    case Method::kPut: return put(scope_name, *info, key, std::move(body), target);
    case Method::kDelete: return erase(scope_name, *info, key);
    case Method::kOther: break;
  }
  return refuse(405, fmt::format("{} is not served", method_name(method)));
}

Reply Store::rank_and_size(Method method, const std::string& key) const {
  if (method != Method::kGet) {
    return refuse(403, fmt::format("{} of {}/{}: rank_and_size is answered by the launcher from "
                                   "the job's plan; it takes GET only",
                                   method_name(method), kRankAndSizeScope, key));
  }
  if (elastic_ && find_slot(plan_, key) != nullptr) {
    Reply r;
    r.deferred_slot = key;
    return r;
  }
  return rank_and_size_reply(key);
}

Reply Store::rank_and_size_reply(std::string_view key) const {
  // As horovodrun's elastic driver: a slot the job does not have gets -1 everywhere.
  const Slot* slot = find_slot(plan_, key);
  const Slot none{-1, -1, -1, -1, -1};
  const Slot& s = slot != nullptr ? *slot : none;
  const int size = slot != nullptr ? plan_.world_size : -1;
  return answer(200, fmt::format("{},{},{},{},{},{}", s.rank, size, s.local_rank, s.local_size,
                                 s.cross_rank, s.cross_size));
}

Reply Store::put(const std::string& scope_name, const ScopeInfo& info, const std::string& key,
                 std::string body, std::string_view target) {
  if (body.size() > limits_.max_body_bytes) {
    return refuse(413, fmt::format("body of {} bytes for '{}' exceeds the limit of {} bytes",
                                   body.size(), target, limits_.max_body_bytes));
  }
  // A finalized Gloo scope is opened again by the next PUT: hvd.shutdown() then hvd.init() (an
  // elastic reset) rendezvous again under the same names. Horovod's shutdown is collective, so
  // every rank has sent its DELETEs of the last round before any rank starts the next.
  if (closed_.erase(scope_name) != 0) ++rounds_[scope_name];
  auto s = scopes_.find(scope_name);
  if (s == scopes_.end()) {
    if (info.kind == ScopeKind::kProcessSet) {
      std::size_t sets = 0;
      for (const auto& [name, unused] : scopes_) {
        sets += resolve_scope(plan_, name)->kind == ScopeKind::kProcessSet;
      }
      if (sets >= limits_.max_process_set_scopes) {
        return refuse(403, fmt::format("too many process-set scopes (limit {})",
                                       limits_.max_process_set_scopes));
      }
    }
    s = scopes_.emplace(scope_name, Scope{}).first;
  }
  // Gloo stores two keys per rank; allow twice that and a little slack. worker_addresses holds
  // one key per slot, which find_slot() already bounds.
  const std::size_t max_keys = 4u * static_cast<std::size_t>(info.base_size) + 8u;
  if (s->second.values.count(key) == 0 && s->second.values.size() >= max_keys) {
    return refuse(403, fmt::format("scope '{}' already holds {} keys (the limit for {} ranks)",
                                   scope_name, max_keys, info.base_size));
  }
  s->second.values[key] = std::move(body);
  if (scope_name == "global") note_global_key(key);
  return answer(200);
}

Reply Store::erase(const std::string& scope_name, const ScopeInfo& info, const std::string& key) {
  auto s = scopes_.find(scope_name);
  if (info.kind == ScopeKind::kWorkerAddresses) {
    // An ad-hoc scope in horovodrun: DELETE removes the key.
    if (s != scopes_.end()) {
      s->second.values.erase(key);
      if (s->second.values.empty()) scopes_.erase(s);
    }
    return answer(200);
  }
  const std::optional<int> rank = parse_rank(key);
  if (!rank || *rank >= info.base_size) {
    return refuse(400,
                  fmt::format("the key must be a rank of the scope (0..{})", info.base_size - 1));
  }
  if (closed_.count(scope_name) != 0) return answer(200);
  // A rank finalizes a Gloo scope only after storing its address there in this round ("<rank>" or
  // "rank_<rank>"): a DELETE for a rank that did not cannot come from that rank.
  if (info.kind == ScopeKind::kGloo &&
      (s == scopes_.end() ||
       (s->second.values.count(key) == 0 && s->second.values.count("rank_" + key) == 0))) {
    return refuse(403, fmt::format("rank {} of scope '{}' has not stored its address in this "
                                   "round; its DELETE does not count",
                                   *rank, scope_name));
  }
  if (info.kind == ScopeKind::kProcessSet) {
    if (s != scopes_.end()) {
      s->second.values.erase(key);
      if (s->second.values.empty()) scopes_.erase(s);
    }
    return answer(200);
  }
  if (s == scopes_.end()) s = scopes_.emplace(scope_name, Scope{}).first;
  s->second.finished.insert(*rank);
  if (static_cast<int>(s->second.finished.size()) == info.base_size) {
    scopes_.erase(s);
    closed_.insert(scope_name);
  }
  return answer(200);
}

Store::Stats Store::stats() const {
  Stats st;
  for (const auto& [name, scope] : scopes_) {
    if (scope.values.empty()) continue;
    ++st.scopes;
    st.keys += scope.values.size();
    for (const auto& [k, v] : scope.values) st.bytes += k.size() + v.size();
  }
  return st;
}

}  // namespace hora::rdv::horovod
