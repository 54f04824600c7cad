// The pickle side of rendezvous/horovod/ as a command, for horovod_pickle_real_test.py to check
// against Horovod's own Python:
//   horovod_pickle_tool hosts-updated TIMESTAMP RES   the HostsUpdatedRequest pickle on stdout
//   horovod_pickle_tool parse-addresses               a worker_addresses body (base64) on stdin;
//                                                     prints "IFACE IP PORT" lines, "key HEX"
//   horovod_pickle_tool notify TIMESTAMP RES          the same body on stdin: sends
//                                                     HostsUpdatedRequest to that worker (every
//                                                     address in its order); prints "ok IP:PORT"
// Exits 1 with the error on stderr when the body is refused, 2 on a usage error.
#include <fmt/format.h>

#include <iostream>
#include <iterator>
#include <string>

#include "rendezvous/horovod/notify.h"
#include "rendezvous/horovod/pickle.h"

using namespace hora::rdv::horovod;

int main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "";
  try {
    if (cmd == "hosts-updated" && argc == 4) {
      const std::string p =
          hosts_updated_pickle(std::stoll(argv[2]), static_cast<HostUpdate>(std::stoi(argv[3])));
      std::cout.write(p.data(), static_cast<std::streamsize>(p.size()));
      return 0;
    }
    if (cmd == "parse-addresses" && argc == 2) {
      const std::string body{std::istreambuf_iterator<char>(std::cin), {}};
      const WorkerAddresses w = parse_worker_addresses(body);
      for (const WorkerEndpoint& e : w.endpoints) {
        std::cout << e.interface << ' ' << e.address << ' ' << e.port << '\n';
      }
      std::cout << "key ";
      for (std::uint8_t b : w.key) std::cout << fmt::format("{:02x}", b);
      std::cout << '\n';
      return 0;
    }
    if (cmd == "notify" && argc == 4) {
      const std::string body{std::istreambuf_iterator<char>(std::cin), {}};
      const WorkerAddresses w = parse_worker_addresses(body);
      boost::asio::io_context io;
      NotifyResult result;
      NotifyOptions o;
      o.deadline = std::chrono::seconds(20);
      notify_hosts_updated(io, w.endpoints, w.key, std::stoll(argv[2]),
                           static_cast<HostUpdate>(std::stoi(argv[3])), o,
                           [&](const NotifyResult& r) { result = r; });
      io.run();
      if (!result.ok) {
        std::cerr << result.error << '\n';
        return 1;
      }
      std::cout << "ok " << result.endpoint << '\n';
      return 0;
    }
  } catch (const PickleError& e) {
    std::cerr << e.what() << '\n';
    return 1;
  }
  std::cerr << "usage: horovod_pickle_tool hosts-updated TIMESTAMP RES | parse-addresses | notify "
               "TIMESTAMP RES\n";
  return 2;
}
