// RFC 4648 test vectors for the base64 codec, through the exported API.

#include <string>

#include "base/test/test.h"
#include "components/codec/codec.h"

namespace {

TEST(Base64CodecTest, Rfc4648Vectors) {
  const auto codec = codec::CreateCodec(codec::Kind::kBase64);
  EXPECT_EQ(std::string(codec->name()), "base64");
  EXPECT_EQ(codec->Encode(""), "");
  EXPECT_EQ(codec->Encode("f"), "Zg==");
  EXPECT_EQ(codec->Encode("fo"), "Zm8=");
  EXPECT_EQ(codec->Encode("foo"), "Zm9v");
  EXPECT_EQ(codec->Encode("foob"), "Zm9vYg==");
  EXPECT_EQ(codec->Encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(codec->Encode("foobar"), "Zm9vYmFy");
}

TEST(Base64CodecTest, DecodeAndReject) {
  const auto codec = codec::CreateCodec(codec::Kind::kBase64);
  std::string data;
  EXPECT_TRUE(codec->Decode("Zm9vYmE=", &data));
  EXPECT_EQ(data, "fooba");
  EXPECT_FALSE(codec->Decode("Zm9", &data));
  EXPECT_FALSE(codec->Decode("Zm9*", &data));
}

}  // namespace
