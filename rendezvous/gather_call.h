// Client::gather's request and answer apart from the connection that carries them: the checks
// and encoding of the request, the decoding and checks of the answer. The client uses them
// around its blocking call; bench/rendezvous_bench uses the same functions for ranks it drives
// from one event loop, so what it measures is the protocol a real rank speaks.
#pragma once

#include <chrono>
#include <cstddef>
#include <span>
#include <string>

#include "rendezvous/client.h"

namespace hora::rdv {

// The GATHER request's payload. Throws Error when `slices` is not size x width bytes.
Bytes encode_gather_call(int rank, int size, const std::string& name,
                         std::span<const std::uint8_t> record, std::size_t width,
                         std::span<const std::uint8_t> slices, std::chrono::milliseconds timeout);

// The OK answer's payload as a GatherResult (the views point into it). Throws ProtocolError,
// naming the rank, the gather and `server`, for a malformed answer or one whose record count or
// width is not the job's size and the width asked for.
GatherResult decode_gather_answer(int rank, int size, const std::string& name,
                                  const std::string& server, std::size_t width, Bytes payload);

}  // namespace hora::rdv
