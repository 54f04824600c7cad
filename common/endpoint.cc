#include "common/endpoint.h"

namespace hora {

std::string endpoint_host(std::string_view endpoint) {
  const std::size_t colon = endpoint.rfind(':');
  std::string_view host = colon == std::string_view::npos ? endpoint : endpoint.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return std::string(host);
}

}  // namespace hora
