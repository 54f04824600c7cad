// A rank that reaches the rendezvous with the launcher's variables, drops the connection
// without goodbye (as a rank whose runtime crashed or hung in a broken state would) and keeps
// running. horarun must treat it as failed after its drop grace. Uses the rendezvous client
// directly, not libhora: the public API has no way to lose the connection and live on.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "rendezvous/client.h"
#include "rendezvous/secret.h"

int main() {
  const char* rv = std::getenv("HORA_RENDEZVOUS");
  const char* rank = std::getenv("HORA_RANK");
  const char* size = std::getenv("HORA_SIZE");
  const char* secret = std::getenv("HORA_SECRET");
  if (!rv || !rank || !size || !secret) {
    std::fprintf(stderr, "connection_dropper: run me under horarun\n");
    return 2;
  }
  const std::string addr(rv);
  hora::rdv::ClientOptions options;
  options.host = addr.substr(0, addr.rfind(':'));
  options.port = static_cast<std::uint16_t>(std::atoi(addr.substr(addr.rfind(':') + 1).c_str()));
  options.rank = std::atoi(rank);
  options.size = std::atoi(size);
  options.secret = hora::rdv::parse_secret_hex(secret);
  try {
    auto client = hora::rdv::Client::connect(options);
    std::printf("connected\n");
    std::fflush(stdout);
  } catch (const std::exception& e) {  // the client is destroyed here: a drop, no goodbye
    std::fprintf(stderr, "connection_dropper: %s\n", e.what());
    return 1;
  }
  ::sleep(60);  // alive without a connection: horarun must end this rank
  std::fprintf(stderr, "connection_dropper: never ended\n");
  return 0;
}
