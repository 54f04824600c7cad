#include "cli/output/line_splitter.h"

namespace hora::cli {

void LineSplitter::feed(std::string_view data, const Sink& sink) {
  // The previous call ended exactly at a piece cut for length: a '\n' right here ends that line,
  // which is already out whole; it is no empty line of its own.
  if (cut_ && !data.empty()) {
    if (data.front() == '\n') data.remove_prefix(1);
    cut_ = false;
  }
  while (!data.empty()) {
    const std::size_t nl = data.find('\n');
    if (nl == std::string_view::npos) {
      partial_.append(data);
      if (partial_.size() >= max_line_) {
        std::string_view rest(partial_);
        while (rest.size() >= max_line_) {
          sink(rest.substr(0, max_line_));
          rest.remove_prefix(max_line_);
        }
        partial_.erase(0, partial_.size() - rest.size());
        cut_ = partial_.empty();
      }
      return;
    }
    // Pieces are cut only while more than max_line_ bytes remain, so the last one sent is the
    // line's end and the '\n' that ends it adds nothing.
    std::string_view line = data.substr(0, nl);
    if (!partial_.empty()) {
      partial_.append(line);
      line = partial_;
    }
    while (line.size() > max_line_) {
      sink(line.substr(0, max_line_));
      line.remove_prefix(max_line_);
    }
    sink(line);
    partial_.clear();
    data.remove_prefix(nl + 1);
  }
}

void LineSplitter::finish(const Sink& sink) {
  cut_ = false;
  if (!partial_.empty()) {
    sink(partial_);
    partial_.clear();
  }
}

}  // namespace hora::cli
