// Hex and run-length codecs.

#include <string>

#include "base/test/test.h"
#include "components/codec/codec.h"

namespace {

TEST(HexCodecTest, RoundTrip) {
  const auto codec = codec::CreateCodec(codec::Kind::kHex);
  EXPECT_EQ(codec->Encode(std::string("\x00\x7f\xab\xff", 4)), "007fabff");
  std::string data;
  EXPECT_TRUE(codec->Decode("48692C21", &data));
  EXPECT_EQ(data, "Hi,!");
  EXPECT_FALSE(codec->Decode("4g", &data));
}

TEST(RunLengthCodecTest, RoundTrip) {
  const auto codec = codec::CreateCodec(codec::Kind::kRunLength);
  EXPECT_EQ(codec->Encode("aaabccdddd"), "\x03" "a\x01" "b\x02" "c\x04" "d");
  const std::string long_run(600, 'z');
  const std::string encoded = codec->Encode(long_run);
  EXPECT_EQ(encoded.size(), 6u);  // 255 + 255 + 90
  std::string data;
  EXPECT_TRUE(codec->Decode(encoded, &data));
  EXPECT_EQ(data, long_run);
}

TEST(CodecFactoryTest, Names) {
  codec::Kind kind = codec::Kind::kHex;
  EXPECT_TRUE(codec::CodecKindFromName("rle", &kind));
  EXPECT_TRUE(kind == codec::Kind::kRunLength);
  EXPECT_FALSE(codec::CodecKindFromName("zip", &kind));
}

}  // namespace
