#include "cli/output/log_sink.h"

#include <unistd.h>

#include <cerrno>

#include "cli/output/output.h"

namespace hora::cli {

namespace {

// Where every LogSink's lines go while attached; guarded by target_mutex.
std::mutex target_mutex;
Output* target = nullptr;
std::thread::id target_owner;

}  // namespace

void LogSink::attach(Output* output) {
  std::lock_guard<std::mutex> lock(target_mutex);
  target = output;
  target_owner = std::this_thread::get_id();
}

void LogSink::sink_it_(const spdlog::details::log_msg& msg) {
  spdlog::memory_buf_t formatted;
  formatter_->format(msg, formatted);
  const std::string_view text(formatted.data(), formatted.size());
  {
    std::lock_guard<std::mutex> lock(target_mutex);
    if (target != nullptr && std::this_thread::get_id() == target_owner) {
      target->launcher_text(text);
      return;
    }
  }
  std::string_view rest = text;
  while (!rest.empty()) {
    const ssize_t n = ::write(fd_, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a closed terminal must not end the job (see Output)
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
}

}  // namespace hora::cli
