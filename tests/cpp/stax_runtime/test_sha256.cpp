#include <gtest/gtest.h>

#include "stax/runtime/sha256.h"

namespace tp::stax::runtime {
namespace {

TEST(Sha256, KnownVectors) {  // FIPS 180-2 test vectors
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, BinaryDataWithNulBytes) {
  const std::string with_nul("a\0b", 3);
  EXPECT_NE(sha256_hex(with_nul), sha256_hex("a"));
  EXPECT_EQ(sha256_hex(with_nul).size(), 64u);
}

}  // namespace
}  // namespace tp::stax::runtime
