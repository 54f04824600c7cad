#include "runtime/engine/timeline.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <hora/error.h>

namespace hora::detail::engine {
namespace {

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

}  // namespace

void Timeline::open(const std::string& path, bool mark_cycles, std::string_view fix) {
  close();
  file_ = std::fopen(path.c_str(), "w");
  if (file_ == nullptr) {
    throw Error("hora: cannot create the timeline file '" + path + "' (" + std::string(fix) +
                "): " + std::strerror(errno));
  }
  path_ = path;
  mark_cycles_ = mark_cycles;
  first_event_ = true;
  origin_ = Clock::now();
  rows_.clear();
  std::fputs("[\n", file_);
  event(R"({"name":"process_name","ph":"M","pid":0,"tid":0,"args":{"name":"engine cycles"}})");
}

long long Timeline::micros(Clock::time_point t) const {
  return std::chrono::duration_cast<std::chrono::microseconds>(t - origin_).count();
}

void Timeline::event(const std::string& json) {
  if (!first_event_) std::fputs(",\n", file_);
  first_event_ = false;
  std::fputs(json.c_str(), file_);
}

int Timeline::row(const std::string& tensor) {
  auto [it, inserted] = rows_.try_emplace(tensor, static_cast<int>(rows_.size()) + 1);
  if (inserted) {
    const std::string pid = std::to_string(it->second);
    event(R"({"name":"process_name","ph":"M","pid":)" + pid + R"(,"tid":0,"args":{"name":)" +
          json_string(tensor) + "}}");
    event(R"({"name":"process_sort_index","ph":"M","pid":)" + pid +
          R"(,"tid":0,"args":{"sort_index":)" + pid + "}}");
  }
  return it->second;
}

void Timeline::span(const std::string& tensor, std::string_view activity, Clock::time_point start,
                    Clock::time_point end, std::string_view args_json) {
  if (file_ == nullptr) return;
  int pid = row(tensor);
  long long ts = micros(std::max(start, origin_));
  long long dur = std::max(0LL, micros(end) - ts);
  std::string e = R"({"name":)" + json_string(activity) + R"(,"ph":"X","pid":)" +
                  std::to_string(pid) + R"(,"tid":0,"ts":)" + std::to_string(ts) + R"(,"dur":)" +
                  std::to_string(dur);
  if (!args_json.empty()) {
    e += R"(,"args":{)";
    e += args_json;
    e += "}";
  }
  e += "}";
  event(e);
}

void Timeline::mark_cycle(Clock::time_point when) {
  if (file_ == nullptr || !mark_cycles_) return;
  event(R"({"name":"CYCLE_START","ph":"i","s":"p","pid":0,"tid":0,"ts":)" +
        std::to_string(micros(when)) + "}");
}

void Timeline::flush() {
  if (file_ != nullptr) std::fflush(file_);
}

void Timeline::close() {
  if (file_ == nullptr) return;
  std::fputs("\n]\n", file_);
  // Nothing useful can be done about a failing close at shutdown: the trace is diagnostics only.
  std::fclose(file_);
  file_ = nullptr;
  path_.clear();
}

}  // namespace hora::detail::engine
