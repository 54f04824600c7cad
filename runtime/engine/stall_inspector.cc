#include "runtime/engine/stall_inspector.h"

#include <algorithm>
#include <cstdio>

#include "common/duration.h"

namespace hora::detail::engine {
namespace {

// The table is scanned at most this often; the warning and shutdown times are coarser anyway.
constexpr std::chrono::milliseconds kCheckInterval{50};

}  // namespace

StallInspector::StallInspector(const EngineOptions& options, int rank, Sink sink)
    : enabled_(options.stall_check),
      rank_(rank),
      sink_(std::move(sink)),
      warning_(options.stall_warning_time),
      shutdown_(options.stall_shutdown_time) {}

bool StallInspector::should_uncache(Clock::time_point submitted, Clock::time_point now) const {
  if (!enabled_) return false;
  auto limit = warning_;
  if (shutdown_.count() > 0) limit = std::min(limit, shutdown_);
  return now - submitted >= limit;
}

std::string StallInspector::format_ranks(const std::vector<int>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(ranks[i]);
    if (j == i + 1) {
      out += ", ";  // (not ", " + string: GCC 12's -Wrestrict false positive at -O3)
      out += std::to_string(ranks[j]);
    } else if (j > i + 1) {
      out += '-';
      out += std::to_string(ranks[j]);
    }
    i = j + 1;
  }
  return out;
}

std::string StallInspector::format_warning(const std::vector<MessageTable::Pending>& stalled,
                                           Clock::time_point now) const {
  std::string out = "hora: rank " + std::to_string(rank_) +
                    ": stall check: " + std::to_string(stalled.size()) +
                    (stalled.size() == 1 ? " op was" : " ops were") +
                    " submitted by some ranks but not by others for more than " +
                    format_duration(warning_) + ":\n";
  for (const auto& p : stalled) {
    out += "  " + std::string(name_of(p.type)) + " '" + p.name + "': missing on rank" +
           (p.missing.size() == 1 ? " " : "s ") + format_ranks(p.missing) + "; submitted by rank" +
           (p.submitted.size() == 1 ? " " : "s ") + format_ranks(p.submitted) + " (waiting " +
           format_duration(now - p.first_seen) + ")\n";
  }
  out +=
      "  The missing ranks are stuck elsewhere or submit different names. "
      "HORA_STALL_CHECK_SECONDS sets when this warning fires, HORA_STALL_SHUTDOWN_SECONDS "
      "fails such ops after a while, HORA_STALL_CHECK_DISABLE=1 turns the check off.\n";
  return out;
}

std::vector<std::string> StallInspector::check(const MessageTable& table, Clock::time_point now) {
  std::vector<std::string> abandon;
  if (!enabled_ || table.size() == 0 || now - last_check_ < kCheckInterval) return abandon;
  last_check_ = now;
  if (rank_ == 0 && (!warned_ || now - last_warning_ >= warning_)) {
    std::vector<MessageTable::Pending> stalled = table.pending_since(now - warning_);
    if (!stalled.empty()) {
      warned_ = true;
      last_warning_ = now;
      if (sink_) sink_(format_warning(stalled, now));
    }
  }
  if (shutdown_.count() > 0) {
    for (const auto& p : table.pending_since(now - shutdown_)) {
      if (proposed_.insert(p.name).second) abandon.push_back(p.name);
    }
  }
  return abandon;
}

}  // namespace hora::detail::engine
