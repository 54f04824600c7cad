#include "cli/spawn/stream_driver.h"

#include <boost/asio/post.hpp>

namespace hora::cli {

namespace asio = boost::asio;

StreamDriver::StreamDriver(asio::io_context& io, agent::Stream& stream) : io_(io), stream_(stream) {
  if (stream_.fd() >= 0) sd_.emplace(io, stream_.fd());
  stream_.set_kick([this] { kick(); });
}

StreamDriver::~StreamDriver() {
  *alive_ = false;
  stream_.set_kick({});
  if (!sd_) return;
  boost::system::error_code ignored;
  sd_->cancel(ignored);
  sd_->release();  // the stream owns and closes its descriptor
}

void StreamDriver::kick() {
  stream_.pump();
  const agent::Stream::Interest want = stream_.interest();
  std::weak_ptr<bool> alive = alive_;
  if (want.again && !posted_) {
    posted_ = true;
    asio::post(io_, [this, alive] {
      if (alive.expired()) return;
      posted_ = false;
      kick();
    });
  }
  // One wait per direction at a time; its completion pumps again.
  auto arm = [&](bool& armed, asio::posix::stream_descriptor::wait_type what) {
    if (armed || !sd_) return;
    armed = true;
    sd_->async_wait(what, [this, alive, &armed](const boost::system::error_code& ec) {
      if (alive.expired()) return;
      armed = false;
      if (!ec) kick();
    });
  };
  if (want.read) arm(read_armed_, asio::posix::stream_descriptor::wait_read);
  if (want.write) arm(write_armed_, asio::posix::stream_descriptor::wait_write);
}

}  // namespace hora::cli
