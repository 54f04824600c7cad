// hora.driver._rendezvous: hora's rendezvous server (rendezvous/server.h) in a Python process, for
// the drivers of engines that start the ranks themselves (hora.spark, hora.ray). horarun runs the
// same server on its own io_context; here a thread of the extension runs it, and Python talks to
// it through the few calls below. Like cli/, this is a launcher-side user of rendezvous/ and never
// of cli/ (docs/spark.md says why a module and not a helper executable).
//
// Threading: the Server lives on one io_context thread started by the constructor. Everything
// Python calls either posts to that thread and waits for the answer with a deadline (ranks_seen,
// port is read once at start) or is one of the server's own thread-safe calls (abort_all, stop).
// The server's events (a rank connected, a rank's connection ended) are queued under a mutex and
// taken by wait_event(), which waits on a condition variable with the GIL released.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common/shm_name.h"
#include "rendezvous/errors.h"
#include "rendezvous/log.h"
#include "rendezvous/secret.h"
#include "rendezvous/server.h"

namespace py = pybind11;

namespace {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

// One event as Python sees it: (kind, rank, clean, text). kind is "connected" (text: the peer),
// "disconnected" (clean: the rank said goodbye; text: what happened otherwise) or "rejected"
// (rank -1; text: the peer and the reason).
using Event = std::tuple<std::string, int, bool, std::string>;

class DriverRendezvous {
 public:
  DriverRendezvous(int size, const std::string& bind_address, double auth_timeout_s)
      : secret_(hora::rdv::generate_secret()), work_(asio::make_work_guard(io_)) {
    if (size < 1)
      throw std::invalid_argument("size must be at least 1, not " + std::to_string(size));
    hora::rdv::ServerOptions options;
    options.bind_address = bind_address;
    options.size = size;
    options.secret = secret_;
    options.auth_timeout =
        std::max<std::chrono::milliseconds>(hora::rdv::ServerOptions::kDefaultAuthTimeout,
                                            std::chrono::milliseconds(
                                                static_cast<long long>(auth_timeout_s * 1000)));
    hora::rdv::ServerEvents events;
    events.on_connected = [this](int rank, const std::string& peer) {
      push({"connected", rank, false, peer});
    };
    events.on_disconnected = [this](int rank, bool clean, const std::string& reason) {
      push({"disconnected", rank, clean, reason});
    };
    events.on_rejected = [this](const std::string& peer, const std::string& reason) {
      push({"rejected", -1, false, peer + ": " + reason});
    };
    // Built here, on the caller's thread, before the io thread runs: nothing else touches the
    // server yet, and a bind failure reaches Python as an exception from the constructor.
    server_ = std::make_unique<hora::rdv::Server>(io_, options, std::move(events));
    port_ = server_->port();
    thread_ = std::thread([this] { io_.run(); });
  }

  ~DriverRendezvous() { stop(); }

  DriverRendezvous(const DriverRendezvous&) = delete;
  DriverRendezvous& operator=(const DriverRendezvous&) = delete;

  int port() const { return port_; }
  std::string secret_hex() const { return hora::rdv::secret_to_hex(secret_); }

  // The ranks that have authenticated at least once. Asked on the io thread (the server's state
  // belongs to it); an answer that does not come within 10 s means the io thread is stuck.
  std::vector<int> ranks_seen() {
    auto answer = std::make_shared<std::promise<std::vector<int>>>();
    auto future = answer->get_future();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_) return {};
    }
    asio::post(io_, [this, answer] {
      const std::set<int>& seen = server_->ranks_seen();
      answer->set_value(std::vector<int>(seen.begin(), seen.end()));
    });
    py::gil_scoped_release release;
    if (future.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      throw std::runtime_error("the rendezvous server's thread did not answer within 10 s");
    }
    return future.get();
  }

  // The next event, or None when none came within timeout_s seconds or the server was stopped
  // (at once: a thread waiting here must be able to end before the interpreter does).
  std::optional<Event> wait_event(double timeout_s) {
    py::gil_scoped_release release;
    const auto deadline =
        Clock::now() + std::chrono::microseconds(static_cast<long long>(timeout_s * 1e6));
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_until(lock, deadline, [this] { return !events_.empty() || stopped_; }) ||
        events_.empty()) {
      return std::nullopt;
    }
    Event e = std::move(events_.front());
    events_.pop_front();
    return e;
  }

  // ABORT to every connected rank, and to every rank that connects later (only the first reason
  // is sent). The server posts it to its own thread.
  void abort_all(const std::string& reason) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopped_) server_->abort_all(reason);
  }

  // Closes the listening socket and every connection, and ends the io thread. Idempotent.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_) return;
      stopped_ = true;
    }
    cv_.notify_all();
    py::gil_scoped_release release;
    server_->stop();
    work_.reset();
    asio::post(io_, [this] { server_.reset(); });  // destroyed on its own thread, after stop()
    if (thread_.joinable()) thread_.join();
  }

 private:
  void push(Event e) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      events_.push_back(std::move(e));
    }
    cv_.notify_all();
  }

  hora::rdv::Secret secret_;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::unique_ptr<hora::rdv::Server> server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> events_;
  bool stopped_ = false;
};

std::string shm_name_prefix(const std::string& secret_hex, int host_index) {
  const hora::rdv::Secret secret = hora::rdv::parse_secret_hex(secret_hex, "secret_hex");
  return hora::shm_name_prefix(secret.data(), secret.size(), host_index);
}

}  // namespace

PYBIND11_MODULE(_rendezvous, m) {
  m.doc() = "hora's rendezvous server for drivers that do not run horarun (hora.spark, hora.ray)";
  py::register_exception<hora::rdv::Error>(m, "RendezvousError", PyExc_RuntimeError);
  py::class_<DriverRendezvous>(m, "Server")
      .def(py::init<int, const std::string&, double>(), py::arg("size"), py::arg("bind_address"),
           py::arg("auth_timeout_s") = 10.0,
           "Starts a rendezvous server for `size` ranks on bind_address (port chosen by the "
           "system), with a new 32-byte secret")
      .def_property_readonly("port", &DriverRendezvous::port)
      .def_property_readonly("secret_hex", &DriverRendezvous::secret_hex,
                             "the job secret as HORA_SECRET carries it (64 hex digits)")
      .def("ranks_seen", &DriverRendezvous::ranks_seen)
      .def("wait_event", &DriverRendezvous::wait_event, py::arg("timeout_s"),
           "(kind, rank, clean, text) or None after timeout_s seconds")
      .def("abort_all", &DriverRendezvous::abort_all, py::arg("reason"))
      .def("stop", &DriverRendezvous::stop);
  m.def(
      "set_log_level",
      [](const std::string& level) {
        hora::rdv::logger()->set_level(spdlog::level::from_str(level));
      },
      py::arg("level"), "the rendezvous logger's level: trace, debug, info, warn, error, off");
  m.def("shm_name_prefix", &shm_name_prefix, py::arg("secret_hex"), py::arg("host_index"),
        "the /dev/shm name prefix of the job's segments on one host (common/shm_name.h)");
}
