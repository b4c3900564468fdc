// Varints, checksums and frames.

#include <string>

#include "base/test/test.h"
#include "components/codec/codec.h"

namespace {

TEST(VarintTest, Encoding) {
  std::string out;
  codec::AppendVarint(300, &out);
  EXPECT_EQ(out, "\xAC\x02");
  out.clear();
  codec::AppendVarint(UINT64_MAX, &out);
  EXPECT_EQ(out.size(), 10u);
  std::string_view input = out;
  uint64_t value = 0;
  EXPECT_TRUE(codec::ReadVarint(&input, &value));
  EXPECT_EQ(value, UINT64_MAX);
  EXPECT_TRUE(input.empty());
}

TEST(FrameTest, WrapAndUnwrap) {
  EXPECT_EQ(codec::Checksum("123456789"), 0xCBF43926u);
  const std::string frame = codec::WrapFrame("123456789");
  EXPECT_EQ(frame, std::string("\x09" "123456789\x26\x39\xF4\xCB", 14));
  std::string payload;
  EXPECT_TRUE(codec::UnwrapFrame(frame, &payload));
  EXPECT_EQ(payload, "123456789");
  std::string corrupt = frame;
  corrupt[3] ^= 1;
  EXPECT_FALSE(codec::UnwrapFrame(corrupt, &payload));
}

}  // namespace
