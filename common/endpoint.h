// "host:port" text as sockets and libssh2 report it, and the host part of it.
#pragma once

#include <string>
#include <string_view>

namespace hora {

// The address of an endpoint without its port: "127.0.0.1:40312" -> "127.0.0.1",
// "[::1]:40312" -> "::1"; text without a colon is returned as it is.
std::string endpoint_host(std::string_view endpoint);

}  // namespace hora
