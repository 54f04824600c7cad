// Writes a whole buffer to a blocking descriptor.
#pragma once

#include <string_view>

namespace hora {

// Writes all of `text` to `fd`, retrying after EINTR and short writes. Gives up silently at the
// first error or zero-length write: its callers write diagnostics to a terminal or a channel
// that may be gone, and have nobody left to tell.
void write_all(int fd, std::string_view text);

}  // namespace hora
