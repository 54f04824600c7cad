// A client of Horovod's Gloo HTTP rendezvous that sends what Horovod 0.28.1's worker sends
// (horovod/common/gloo/http_store.cc with its HTTPRequest library; captured from the real
// worker): one connection per request, the request line `METHOD /<scope>/<key> HTTP/1.1`, the
// headers `Host: <addr>` and `Content-Length: <n>` (also on GET and DELETE, with n = 0), the
// body, then the reply read up to its Content-Length. 200 and 404 are answers; other statuses
// are returned for the tests to check (Horovod retries them three times, then fails).
//
// rendezvous() plays one Gloo context's rendezvous the way Horovod's Rendezvous() does: PUT
// rank_<r> and <r>, poll GET every peer's <p> until it is there (404 meanwhile), meet the others
// (Gloo uses a barrier over the new context; here a `done_<round>_<r>` key each: a process-set
// scope keeps them after the DELETEs, as Horovod's server does), then DELETE /<r>.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous/socket.h"

namespace hora::rdv::horovod::test {

struct HttpReply {
  int status = 0;
  std::string body;
};

class HorovodHttpClient {
 public:
  HorovodHttpClient(std::string addr, std::uint16_t port,
                    std::chrono::milliseconds timeout = std::chrono::seconds(30))
      : addr_(std::move(addr)), port_(port), timeout_(timeout) {}

  // Sends raw bytes on a fresh connection and reads one reply; nullopt when the server closed
  // the connection without a complete reply.
  std::optional<HttpReply> raw(const std::string& bytes) const {
    const auto deadline = net::Clock::now() + timeout_;
    std::string why;
    hora::UniqueFd fd = net::connect_tcp(addr_, port_, deadline, &why);
    if (!fd) throw std::runtime_error("connect to the Horovod rendezvous: " + why);
    const auto* p = reinterpret_cast<const std::uint8_t*>(bytes.data());
    if (!net::write_all(fd.get(), std::span(p, bytes.size()), deadline)) return std::nullopt;
    return read_reply(fd.get(), deadline);
  }

  HttpReply request(const std::string& method, const std::string& path,
                    const std::string& body = "") const {
    std::string req = method + " " + path + " HTTP/1.1\r\n";
    req += "Host: " + addr_ + "\r\n";
    req += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
    req += body;
    auto reply = raw(req);
    if (!reply) throw std::runtime_error(method + " " + path + ": no reply");
    return *reply;
  }

  HttpReply put(const std::string& scope, const std::string& key, const std::string& body) const {
    return request("PUT", "/" + scope + "/" + key, body);
  }
  HttpReply get(const std::string& scope, const std::string& key) const {
    return request("GET", "/" + scope + "/" + key);
  }
  HttpReply del(const std::string& scope, int rank) const {
    return request("DELETE", "/" + scope + "/" + std::to_string(rank));
  }

  // Polls GET every 10 ms (as HTTPStore::wait does) until 200; throws after the timeout.
  // *not_found counts the 404s seen.
  std::string wait(const std::string& scope, const std::string& key,
                   int* not_found = nullptr) const {
    const auto deadline = net::Clock::now() + timeout_;
    while (true) {
      HttpReply r = get(scope, key);
      if (r.status == 200) return r.body;
      if (r.status != 404) {
        throw std::runtime_error("GET /" + scope + "/" + key + ": status " +
                                 std::to_string(r.status) + ": " + r.body);
      }
      if (not_found) ++*not_found;
      if (net::Clock::now() > deadline) {
        throw std::runtime_error("GET /" + scope + "/" + key + ": still 404 at the deadline");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // HTTPStore's poll interval
    }
  }

  // One Gloo context's rendezvous in `scope` as rank `rank` of `size`: returns every rank's
  // value (`value_of(rank)` is what each stored). `round` counts re-initialisations
  // (hvd.shutdown() then hvd.init()). Throws on any unexpected status.
  std::vector<std::string> rendezvous(const std::string& scope, int rank, int size,
                                      const std::string& value, int* not_found = nullptr,
                                      int round = 0) const {
    expect_ok(put(scope, "rank_" + std::to_string(rank), std::to_string(rank)), "PUT rank_");
    expect_ok(put(scope, std::to_string(rank), value), "PUT");
    std::vector<std::string> all(static_cast<std::size_t>(size));
    for (int p = 0; p < size; ++p) {
      all[static_cast<std::size_t>(p)] =
          p == rank ? value : wait(scope, std::to_string(p), not_found);
    }
    const std::string done = "done_" + std::to_string(round) + "_";
    expect_ok(put(scope, done + std::to_string(rank), ""), "PUT done_");
    for (int p = 0; p < size; ++p) wait(scope, done + std::to_string(p), not_found);
    expect_ok(del(scope, rank), "DELETE");
    return all;
  }

 private:
  static void expect_ok(const HttpReply& r, const std::string& what) {
    if (r.status != 200) {
      throw std::runtime_error(what + ": status " + std::to_string(r.status) + ": " + r.body);
    }
  }

  static std::optional<HttpReply> read_reply(int fd, net::Clock::time_point deadline) {
    std::string head;
    while (head.size() < 4 || head.compare(head.size() - 4, 4, "\r\n\r\n") != 0) {
      std::uint8_t c = 0;
      if (!net::read_exact(fd, std::span(&c, 1), deadline)) return std::nullopt;
      head.push_back(static_cast<char>(c));
      if (head.size() > 16384) return std::nullopt;
    }
    HttpReply reply;
    // "HTTP/1.1 200 OK"
    const auto sp = head.find(' ');
    if (sp == std::string::npos) return std::nullopt;
    reply.status = std::stoi(head.substr(sp + 1, 3));
    std::size_t length = 0;
    for (std::size_t at = head.find("\r\n"); at != std::string::npos && at + 2 < head.size();) {
      const std::size_t end = head.find("\r\n", at + 2);
      std::string line = head.substr(at + 2, end - at - 2);
      for (std::size_t i = 0; i < line.size() && line[i] != ':'; ++i) {
        line[i] = static_cast<char>(std::tolower(static_cast<unsigned char>(line[i])));
      }
      if (line.rfind("content-length:", 0) == 0) length = std::stoul(line.substr(15));
      at = end;
    }
    reply.body.resize(length);
    auto* b = reinterpret_cast<std::uint8_t*>(reply.body.data());
    if (length != 0 && !net::read_exact(fd, std::span(b, length), deadline)) return std::nullopt;
    return reply;
  }

  std::string addr_;
  std::uint16_t port_;
  std::chrono::milliseconds timeout_;
};

}  // namespace hora::rdv::horovod::test
