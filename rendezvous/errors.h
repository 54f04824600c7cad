// Exceptions thrown by the rendezvous client and server. The runtime translates them into
// hora::Error subclasses; the launcher prints them. Messages carry host:port and the step.
#pragma once

#include <stdexcept>
#include <string>

namespace hora::rdv {

class Error : public std::runtime_error {
  using std::runtime_error::runtime_error;
};
class ConnectError : public Error {
  using Error::Error;
};  // could not reach the server
class AuthError : public Error {
  using Error::Error;
};  // server refused our proof
class TimeoutError : public Error {
  using Error::Error;
};  // a deadline passed
class ProtocolError : public Error {
  using Error::Error;
};  // malformed frame, version mismatch
class AbortedError : public Error {
  using Error::Error;
};  // the launcher aborted the job

}  // namespace hora::rdv
