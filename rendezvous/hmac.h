// HMAC-SHA256 for the rendezvous handshake (OpenSSL). The client proves it knows the job
// secret by answering the server's nonce with auth_proof(); the server recomputes it and
// compares in constant time.
#pragma once

#include <cstdint>
#include <span>

#include "rendezvous/secret.h"
#include "rendezvous/wire.h"

namespace hora::rdv {

using Digest = std::array<std::uint8_t, 32>;

Digest hmac_sha256(std::span<const std::uint8_t> key, std::span<const std::uint8_t> data);

// HMAC-SHA256(secret, nonce || rank as little-endian int32).
wire::Proof auth_proof(const Secret& secret, const wire::Nonce& nonce, std::int32_t rank);

// The secret of round `round` of an elastic job (docs/elastic.md):
// HMAC-SHA256(job secret, "hora-round" || round as little-endian uint32). A rank of one round
// cannot authenticate to another round's server.
Secret round_secret(const Secret& job, std::uint32_t round);

// Compares without an early exit (CRYPTO_memcmp), so timing does not reveal how many leading
// bytes of a guessed proof were right.
bool equal_constant_time(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b);

}  // namespace hora::rdv
