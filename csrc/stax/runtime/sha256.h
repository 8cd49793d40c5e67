// SHA-256 of a byte string, as 64 lowercase hex characters. Used for the
// content-addressed kernel cache keys (a thin wrapper over OpenSSL's EVP API,
// which the runtime already links).
#pragma once
#include <string>

namespace tp::stax::runtime {

std::string sha256_hex(const std::string& data);

}  // namespace tp::stax::runtime
