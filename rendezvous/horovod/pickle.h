// The two Python pickles horarun exchanges with a Horovod 0.28.1 elastic worker
// (docs/rendezvous.md, "Elastic jobs"), written and read without Python.
//
// Written: the HostsUpdatedRequest that horovodrun's driver sends to rank 0's notification
// service when hosts are added or removed (horovod/runner/elastic/worker.py). The worker
// unpickles it with the standard unpickler, so the bytes name Horovod's two classes by module
// and name (protocol 2, GLOBAL), exactly as Python's own pickler would build them.
//
// Read: the body of the worker's `PUT /worker_addresses/<host>:<local rank>`, base64 of a
// cloudpickle (protocol 5) of `({interface: [(ip, port), ...]}, key)`, where key is the 32
// random bytes that authenticate the notification service (HMAC-SHA256). A pickle is a program
// for a stack machine; this reader runs only the opcodes that build str, bytes, int, list, dict
// and tuple values (the ones that body uses) and refuses every other opcode by name and offset:
// nothing is imported, called or constructed beyond those plain values. Sizes, the memo and the
// MARK depth are bounded.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/errors.h"

namespace hora::rdv::horovod {

// horovod.runner.elastic.worker.HostUpdateResult (an IntFlag).
enum class HostUpdate : int { kRemoved = 1, kAdded = 2, kMixed = 3 };

// The pickle of HostsUpdatedRequest(timestamp, HostUpdateResult(res)): what
// WorkerNotificationClient.notify_hosts_updated sends (the body of the framed message;
// notify.h frames it). Horovod's driver uses int(time.time()) as the timestamp, and the worker
// ignores a timestamp not newer than the last one it saw.
std::string hosts_updated_pickle(std::int64_t timestamp, HostUpdate res);

// One address of a worker's notification service, as the worker listed it.
struct WorkerEndpoint {
  std::string interface;  // the network interface's name ("lo", "eth0")
  std::string address;    // an IP address, as Python wrote it
  std::uint16_t port = 0;

  bool operator==(const WorkerEndpoint&) const = default;
};

struct WorkerAddresses {
  std::vector<WorkerEndpoint> endpoints;  // interfaces in the pickle's order, then addresses
  std::array<std::uint8_t, 32> key{};     // HMAC key of the worker's notification service
};

// A body or pickle that is not what a Horovod worker sends. The message names the step (base64,
// the opcode and its offset, or the value that has the wrong shape).
class PickleError : public Error {
  using Error::Error;
};

struct PickleLimits {
  std::size_t max_pickle_bytes = 64u << 10;
  std::size_t max_stack = 256;      // values on the stack, MARKs included
  std::size_t max_marks = 8;        // open MARKs at once
  std::size_t max_memo = 4096;      // memo entries
  std::size_t max_values = 8192;    // values built in all
  std::size_t max_endpoints = 256;  // (ip, port) pairs over every interface
};

// Decodes standard base64 (RFC 4648 alphabet, '=' padding; no whitespace: Python's
// base64.b64encode writes none). Throws PickleError naming the offset of a bad character.
std::string base64_decode(std::string_view text);

// Parses the body of PUT /worker_addresses/<slot> (base64 of the pickle). Throws PickleError.
WorkerAddresses parse_worker_addresses(std::string_view base64_body,
                                       const PickleLimits& limits = {});

// The same for the pickle itself (already decoded).
WorkerAddresses parse_worker_addresses_pickle(std::string_view pickle,
                                              const PickleLimits& limits = {});

}  // namespace hora::rdv::horovod
