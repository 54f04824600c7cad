// Exceptions thrown by hora's SSH layer. The launcher prints what(); every message names the host
// (the alias as given, and host:port when known), the step that failed, why, and what to change.
#pragma once

#include <stdexcept>
#include <string>

namespace hora::ssh {

class Error : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

// An ssh_config file could not be read or has a bad value ("file:line: ...").
class ConfigError : public Error {
  using Error::Error;
};

// The host name does not resolve ("server3: name does not resolve").
class ResolveError : public Error {
  using Error::Error;
};

// TCP connect failed: refused, unreachable, reset during the SSH handshake.
class ConnectError : public Error {
  using Error::Error;
};

// A deadline passed (connect, handshake, authentication, a command run with run()).
class TimeoutError : public Error {
  using Error::Error;
};

// The server's host key is unknown under StrictHostKeyChecking=yes, changed, or revoked.
class HostKeyError : public Error {
  using Error::Error;
};

// No method authenticated us; the message lists what was tried and what the server accepts.
class AuthError : public Error {
  using Error::Error;
};

// A channel could not be opened or its command not started, or the connection was lost.
class ChannelError : public Error {
  using Error::Error;
};

}  // namespace hora::ssh
