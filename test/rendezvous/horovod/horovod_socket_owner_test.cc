// socket_owner() over real loopback connections: the uid of the connecting socket, not of our own
// accepted one (both ends are rows of /proc/net/tcp), for a child that dropped to uid 65534.
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <catch2/catch.hpp>

#include "rendezvous/horovod/socket_owner.h"

using boost::asio::ip::tcp;
using hora::rdv::horovod::proc_net_endpoint;
using hora::rdv::horovod::socket_owner;

namespace {

// Accepts one connection within 10 s (the test's deadline) from a child that connects as `uid`
// (or as itself when unset), and returns socket_owner() of the accepted socket's ends.
std::optional<uid_t> owner_of_child(const boost::asio::ip::address& addr, std::optional<uid_t> uid,
                                    std::optional<uid_t>* reversed) {
  boost::asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(addr, 0));
  const tcp::endpoint listen = acceptor.local_endpoint();
  int done[2];
  REQUIRE(::pipe(done) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(done[1]);
    if (uid && (::setgid(*uid) != 0 || ::setuid(*uid) != 0)) ::_exit(2);
    ::alarm(10);
    boost::asio::io_context cio;
    tcp::socket s(cio);
    boost::system::error_code ec;
    s.connect(listen, ec);
    if (ec) ::_exit(3);
    char c;
    (void)!::read(done[0], &c, 1);  // held open until the parent has looked
    ::_exit(0);
  }
  ::close(done[0]);
  pollfd p{acceptor.native_handle(), POLLIN, 0};
  REQUIRE(::poll(&p, 1, 10000) == 1);
  tcp::socket conn = acceptor.accept();
  const std::optional<uid_t> owner = socket_owner(conn.remote_endpoint(), conn.local_endpoint());
  // Swapped ends name our own accepted socket: this process's uid.
  *reversed = socket_owner(conn.local_endpoint(), conn.remote_endpoint());
  ::close(done[1]);
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  return owner;
}

}  // namespace

TEST_CASE("proc_net_endpoint spells addresses as /proc/net/tcp does") {
  const tcp::endpoint ep(boost::asio::ip::make_address("127.0.0.1"), 8080);
  const std::uint32_t one = 1;
  const bool little = *reinterpret_cast<const unsigned char*>(&one) == 1;
  CHECK(proc_net_endpoint(ep) == (little ? "0100007F:1F90" : "7F000001:1F90"));
}

TEST_CASE("socket_owner: a connection of this process's user") {
  std::optional<uid_t> reversed;
  const auto owner =
      owner_of_child(boost::asio::ip::make_address("127.0.0.1"), std::nullopt, &reversed);
  REQUIRE(owner.has_value());
  CHECK(*owner == ::geteuid());
}

TEST_CASE("socket_owner: another user's connection names that user, v4 and v6") {
  if (::geteuid() != 0) {
    WARN("not run: needs root to drop a child to uid 65534");
    return;
  }
  for (const char* a : {"127.0.0.1", "::1"}) {
    INFO(a);
    std::optional<uid_t> reversed;
    const auto owner = owner_of_child(boost::asio::ip::make_address(a), 65534, &reversed);
    REQUIRE(owner.has_value());
    CHECK(*owner == 65534u);
    REQUIRE(reversed.has_value());
    CHECK(*reversed == 0u);
  }
}

TEST_CASE("socket_owner: no socket of this machine matches an unknown peer") {
  const tcp::endpoint nowhere(boost::asio::ip::make_address("198.18.0.1"), 1);
  const tcp::endpoint here(boost::asio::ip::make_address("127.0.0.1"), 2);
  CHECK_FALSE(socket_owner(nowhere, here).has_value());
}
