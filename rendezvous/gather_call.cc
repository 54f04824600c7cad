#include "rendezvous/gather_call.h"

#include <fmt/format.h>

#include "rendezvous/wire.h"

namespace hora::rdv {

Bytes encode_gather_call(int rank, int size, const std::string& name,
                         std::span<const std::uint8_t> record, std::size_t width,
                         std::span<const std::uint8_t> slices, std::chrono::milliseconds timeout) {
  if (width > 0xFFFFFFFFu || slices.size() != width * static_cast<std::size_t>(size)) {
    throw Error(
        fmt::format("rank {}: gather '{}' needs one {}-byte slice per rank ({} bytes), got {}",
                    rank, name, width, width * static_cast<std::size_t>(size), slices.size()));
  }
  return wire::encode_gather(name, static_cast<std::uint64_t>(timeout.count()), record,
                             static_cast<std::uint32_t>(width), static_cast<std::uint32_t>(size),
                             slices);
}

GatherResult decode_gather_answer(int rank, int size, const std::string& name,
                                  const std::string& server, std::size_t width, Bytes payload) {
  GatherResult out;
  out.payload = std::move(payload);
  wire::GatherReplyView view;
  try {
    view = wire::decode_gather_reply(out.payload);
  } catch (const wire::DecodeError& e) {
    throw ProtocolError(fmt::format("rank {}: malformed answer to gather '{}' from {}: {}", rank,
                                    name, server, e.what()));
  }
  if (static_cast<int>(view.records.size()) != size || view.width != width) {
    throw ProtocolError(
        fmt::format("rank {}: gather '{}' returned {} records of {}-byte slices for a job "
                    "of {} ranks and {}-byte slices",
                    rank, name, view.records.size(), view.width, size, width));
  }
  out.records_buffer = std::move(view.records_buffer);  // the views stay valid: same storage
  out.records = std::move(view.records);
  out.width = width;
  out.column = view.column;
  return out;
}

}  // namespace hora::rdv
