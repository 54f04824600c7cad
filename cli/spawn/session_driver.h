// Pumps one ssh::Session from an io_context (see ssh/session.h, "Driving a session from
// Boost.Asio"): the supervisor's loop drives every remote host's connection this way, and with it
// the host's agent channel. kick() may be called at any time on the io_context thread, including
// from inside the session's handlers (the nested pump returns at once and a posted kick follows).
#pragma once

#include <memory>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include "ssh/session.h"

namespace hora::cli {

class SessionDriver {
 public:
  // `session` is not owned; it must outlive the driver.
  SessionDriver(boost::asio::io_context& io, ssh::Session& session);
  ~SessionDriver();
  SessionDriver(const SessionDriver&) = delete;
  SessionDriver& operator=(const SessionDriver&) = delete;

  ssh::Session& session() { return session_; }
  boost::asio::io_context& io() { return io_; }
  void kick();

 private:
  boost::asio::io_context& io_;
  ssh::Session& session_;
  // Wraps session_.fd() without owning it (released in the destructor).
  boost::asio::posix::stream_descriptor sd_;
  bool read_armed_ = false;
  bool write_armed_ = false;
  bool posted_ = false;
  // Completion handlers hold a weak reference: the driver may go away with waits pending.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace hora::cli
