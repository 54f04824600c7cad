// The blob each rank contributes to a full negotiation (Transport::allgather_bytes): the requests
// it has not announced yet and the names it proposes to abandon (stall shutdown).
//
// Wire format (little-endian, produced and read by the same build of libhora on every rank):
//   u8 'H' u8 'E' u8 version(1)
//   u32 request count, then per request:
//     u16 name length, name bytes (UTF-8, no terminator)
//     u8 op type, u8 dtype, u8 reduce op, u64 count, i32 root, i32 device,
//     u32 waited_ms (how long the request had waited on its rank before this announcement; lets
//                    every rank date the stall check from the first submission)
//   u32 abandon count, then per name: u16 length, bytes
// Any deviation (truncation, unknown enum value, trailing bytes) is a hora::Error naming the rank
// that sent it: it means the ranks run different hora builds or memory was corrupted.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "runtime/engine/request.h"

namespace hora::detail::engine {

struct NegotiationMessage {
  static constexpr std::uint8_t kVersion = 2;  // 2: requests carry their shape
  static constexpr std::size_t kMaxNameLength = 65535;

  struct Announcement {
    Request request;
    std::uint32_t waited_ms = 0;
  };
  std::vector<Announcement> requests;
  std::vector<std::string> abandon;

  bool empty() const { return requests.empty() && abandon.empty(); }
  std::vector<std::uint8_t> encode() const;
  static NegotiationMessage decode(std::span<const std::uint8_t> bytes, int from_rank);
};

}  // namespace hora::detail::engine
