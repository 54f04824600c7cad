#include "rendezvous/hmac.h"

#include <string_view>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "rendezvous/errors.h"

namespace hora::rdv {

Digest hmac_sha256(std::span<const std::uint8_t> key, std::span<const std::uint8_t> data) {
  Digest out{};
  unsigned int len = 0;
  // HMAC() is OpenSSL's one-shot interface (not deprecated in 3.0, unlike HMAC_CTX).
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), data.data(), data.size(),
           out.data(), &len) == nullptr ||
      len != out.size()) {
    throw Error("HMAC-SHA256 failed in OpenSSL");
  }
  return out;
}

wire::Proof auth_proof(const Secret& secret, const wire::Nonce& nonce, std::int32_t rank) {
  std::array<std::uint8_t, wire::kNonceBytes + 4> msg{};
  std::copy(nonce.begin(), nonce.end(), msg.begin());
  auto r = static_cast<std::uint32_t>(rank);
  for (int i = 0; i < 4; ++i) msg[wire::kNonceBytes + i] = static_cast<std::uint8_t>(r >> (8 * i));
  return hmac_sha256(secret, msg);
}

Secret round_secret(const Secret& job, std::uint32_t round) {
  constexpr std::string_view kLabel = "hora-round";
  std::array<std::uint8_t, kLabel.size() + 4> msg{};
  std::copy(kLabel.begin(), kLabel.end(), msg.begin());
  for (std::size_t i = 0; i < 4; ++i) {
    msg[kLabel.size() + i] = static_cast<std::uint8_t>(round >> (8 * i));
  }
  return hmac_sha256(job, msg);
}

bool equal_constant_time(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b) {
  if (a.size() != b.size()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace hora::rdv
