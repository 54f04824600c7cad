// The per-job secret: 32 random bytes made by the launcher, handed to every rank as
// HORA_SECRET (64 hex digits, never on a command line), and used as the HMAC key of the
// rendezvous handshake (rendezvous/hmac.h).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace hora::rdv {

using Secret = std::array<std::uint8_t, 32>;

// 32 bytes from OpenSSL's RAND_bytes. Throws rdv::Error if the generator fails.
Secret generate_secret();

// 64 lower-case hex digits.
std::string secret_to_hex(const Secret& secret);

// Parses 64 hex digits (either case). Throws rdv::Error saying what is wrong with the value
// (length, position of the first non-hex character) without echoing it: it is a secret.
// `origin` names where the value came from, e.g. "HORA_SECRET".
Secret parse_secret_hex(std::string_view hex, std::string_view origin = "HORA_SECRET");

}  // namespace hora::rdv
