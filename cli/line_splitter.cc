#include "cli/line_splitter.h"

namespace hora::cli {

void LineSplitter::feed(std::string_view data, const Sink& sink) {
  while (!data.empty()) {
    const std::size_t nl = data.find('\n');
    if (nl == std::string_view::npos) {
      partial_.append(data);
      while (partial_.size() >= max_line_) {
        sink(std::string_view(partial_).substr(0, max_line_));
        partial_.erase(0, max_line_);
      }
      return;
    }
    if (partial_.empty()) {
      std::string_view line = data.substr(0, nl);
      while (line.size() > max_line_) {
        sink(line.substr(0, max_line_));
        line.remove_prefix(max_line_);
      }
      sink(line);
    } else {
      partial_.append(data.substr(0, nl));
      std::string_view line(partial_);
      while (line.size() > max_line_) {
        sink(line.substr(0, max_line_));
        line.remove_prefix(max_line_);
      }
      sink(line);
      partial_.clear();
    }
    data.remove_prefix(nl + 1);
  }
}

void LineSplitter::finish(const Sink& sink) {
  if (!partial_.empty()) {
    sink(partial_);
    partial_.clear();
  }
}

}  // namespace hora::cli
