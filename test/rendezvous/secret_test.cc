// The job secret's hex form and the handshake proof.
#include <catch2/catch.hpp>

#include <cstring>
#include <set>

#include "rendezvous/errors.h"
#include "rendezvous/hmac.h"
#include "rendezvous/secret.h"

using namespace hora::rdv;

TEST_CASE("generated secrets differ and survive the hex round trip", "[secret]") {
  std::set<Secret> seen;
  for (int i = 0; i < 16; ++i) {
    auto s = generate_secret();
    auto hex = secret_to_hex(s);
    CHECK(hex.size() == 64);
    CHECK(hex.find_first_not_of("0123456789abcdef") == std::string::npos);
    CHECK(parse_secret_hex(hex) == s);
    seen.insert(s);
  }
  CHECK(seen.size() == 16);
}

TEST_CASE("hex parsing accepts upper case and refuses malformed values", "[secret]") {
  Secret s{};
  for (std::size_t i = 0; i < s.size(); ++i) s[i] = static_cast<std::uint8_t>(0xa0 + i);
  std::string hex = secret_to_hex(s);
  std::string upper = hex;
  for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  CHECK(parse_secret_hex(upper) == s);

  CHECK_THROWS_WITH(parse_secret_hex(hex.substr(0, 10)),
                    Catch::Contains("HORA_SECRET must be 64 hex digits") &&
                        Catch::Contains("has 10 characters"));
  std::string bad = hex;
  bad[17] = 'g';
  CHECK_THROWS_WITH(parse_secret_hex(bad), Catch::Contains("character 18 is not a hex digit") &&
                                               !Catch::Contains(bad.substr(0, 16)));
  CHECK_THROWS_AS(parse_secret_hex(""), Error);
  CHECK_THROWS_WITH(parse_secret_hex("xyz", "--secret"), Catch::StartsWith("--secret"));
}

TEST_CASE("HMAC-SHA256 matches RFC 4231 test case 2", "[hmac]") {
  std::string key = "Jefe";
  std::string data = "what do ya want for nothing?";
  auto d = hmac_sha256({reinterpret_cast<const std::uint8_t*>(key.data()), key.size()},
                       {reinterpret_cast<const std::uint8_t*>(data.data()), data.size()});
  Secret as_secret{};
  std::memcpy(as_secret.data(), d.data(), d.size());
  CHECK(secret_to_hex(as_secret) ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST_CASE("the proof binds secret, nonce and rank", "[hmac]") {
  auto secret = generate_secret();
  wire::Nonce nonce{};
  nonce.fill(7);
  auto p = auth_proof(secret, nonce, 3);
  CHECK(equal_constant_time(p, auth_proof(secret, nonce, 3)));
  CHECK_FALSE(equal_constant_time(p, auth_proof(secret, nonce, 4)));
  auto other_nonce = nonce;
  other_nonce[31] = 8;
  CHECK_FALSE(equal_constant_time(p, auth_proof(secret, other_nonce, 3)));
  auto other_secret = secret;
  other_secret[0] ^= 1;
  CHECK_FALSE(equal_constant_time(p, auth_proof(other_secret, nonce, 3)));
  // The proof is HMAC over nonce || little-endian rank.
  std::array<std::uint8_t, 36> msg{};
  std::copy(nonce.begin(), nonce.end(), msg.begin());
  msg[32] = 3;
  CHECK(equal_constant_time(p, hmac_sha256(secret, msg)));
  CHECK_FALSE(equal_constant_time(p, std::span(p).first(31)));
}

TEST_CASE("round secrets differ by round and by job, and are stable", "[hmac]") {
  const Secret job = generate_secret();
  const Secret other = generate_secret();
  CHECK(round_secret(job, 0) == round_secret(job, 0));
  CHECK(round_secret(job, 0) != round_secret(job, 1));
  CHECK(round_secret(job, 1) != round_secret(other, 1));
  CHECK(round_secret(job, 0) != job);
}
