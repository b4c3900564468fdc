// LZ codec: exact stream for a small input, round trip for a large one.

#include <string>

#include "base/rand/xorshift.h"
#include "base/test/test.h"
#include "components/codec/codec.h"

namespace {

TEST(LzCodecTest, ExactEncoding) {
  const auto codec = codec::CreateCodec(codec::Kind::kLz);
  // varint(15), literal run "abc", match of 12 bytes at offset 3.
  EXPECT_EQ(codec->Encode("abcabcabcabcabc"),
            std::string("\x0f\x02" "abc\x89\x03\x00", 8));
}

TEST(LzCodecTest, RoundTripRepetitiveData) {
  base::XorShift32 rng(99);
  static const char* const kWords[] = {"alpha ", "beta ", "gamma ",
                                       "delta ", "epsilon\n"};
  std::string text;
  while (text.size() < 50000)
    text += kWords[rng.NextBelow(5)];
  const auto codec = codec::CreateCodec(codec::Kind::kLz);
  const std::string encoded = codec->Encode(text);
  EXPECT_TRUE(encoded.size() < text.size() / 2);
  std::string decoded;
  EXPECT_TRUE(codec->Decode(encoded, &decoded));
  EXPECT_TRUE(decoded == text);
}

TEST(LzCodecTest, RejectsCorruptInput) {
  const auto codec = codec::CreateCodec(codec::Kind::kLz);
  std::string decoded;
  // Match at offset 5 with nothing decoded yet.
  EXPECT_FALSE(codec->Decode(std::string("\x05\x80\x05\x00", 4), &decoded));
}

}  // namespace
