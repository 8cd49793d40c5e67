#include "stax/runtime/sha256.h"

#include <openssl/evp.h>

#include "core/error.h"

namespace tp::stax::runtime {

std::string sha256_hex(const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_len = 0;
  // EVP_Digest is the one-shot form: no context to allocate or free by hand.
  int ok = EVP_Digest(data.data(), data.size(), digest, &digest_len, EVP_sha256(), nullptr);
  TP_CHECK(ok == 1 && digest_len == 32, Error, "sha256_hex: OpenSSL EVP_Digest failed");

  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex(2 * digest_len, '0');
  for (unsigned int i = 0; i < digest_len; ++i) {
    hex[2 * i] = kHex[digest[i] >> 4];
    hex[2 * i + 1] = kHex[digest[i] & 0xF];
  }
  return hex;
}

}  // namespace tp::stax::runtime
