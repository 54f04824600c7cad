// Drives one agent's Stream (cli/agent/agent_link.h) from an io_context, the pattern of
// ssh/session.h's "Driving a session from Boost.Asio": the supervisor's loop drives every remote
// host's agent this way, over SSH or srun. kick() may be called at any time on the io_context
// thread, including from inside the session's handlers (the nested pump returns at once and a
// posted kick follows).
#pragma once

#include <memory>
#include <optional>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include "cli/agent/agent_link.h"

namespace hora::cli {

class StreamDriver {
 public:
  // `stream` is not owned; it must outlive the driver. Sets the stream's kick to this driver's.
  StreamDriver(boost::asio::io_context& io, agent::Stream& stream);
  ~StreamDriver();
  StreamDriver(const StreamDriver&) = delete;
  StreamDriver& operator=(const StreamDriver&) = delete;

  boost::asio::io_context& io() { return io_; }
  void kick();

 private:
  boost::asio::io_context& io_;
  agent::Stream& stream_;
  // Wraps stream_.fd() without owning it (released in the destructor). Empty for a stream
  // without a descriptor (a relayed host's, cli/agent/relay_stream.h): the relaying host's
  // driver moves its bytes, and kick() only pumps it.
  std::optional<boost::asio::posix::stream_descriptor> sd_;
  bool read_armed_ = false;
  bool write_armed_ = false;
  bool posted_ = false;
  // Completion handlers hold a weak reference: the driver may go away with waits pending.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace hora::cli
