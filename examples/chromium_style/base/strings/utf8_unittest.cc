// Tests for UTF-8 encoding and decoding.

#include <string>
#include <vector>

#include "base/strings/utf8.h"
#include "base/test/test.h"

namespace {

TEST(Utf8Test, Encode) {
  std::string out;
  EXPECT_TRUE(base::AppendUtf8(0x41, &out));      // A
  EXPECT_TRUE(base::AppendUtf8(0xE9, &out));      // e acute
  EXPECT_TRUE(base::AppendUtf8(0x20AC, &out));    // euro sign
  EXPECT_TRUE(base::AppendUtf8(0x1F600, &out));   // grinning face
  EXPECT_FALSE(base::AppendUtf8(0xD800, &out));   // surrogate
  EXPECT_EQ(out, "A\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
}

TEST(Utf8Test, DecodeRoundTrip) {
  std::string text;
  for (uint32_t cp = 0; cp <= 0x10FFFF; cp += 97) {
    if (cp < 0xD800 || cp > 0xDFFF)
      base::AppendUtf8(cp, &text);
  }
  std::vector<uint32_t> decoded;
  EXPECT_TRUE(base::DecodeUtf8(text, &decoded));
  size_t index = 0;
  bool all_match = true;
  for (uint32_t cp = 0; cp <= 0x10FFFF; cp += 97) {
    if (cp >= 0xD800 && cp <= 0xDFFF)
      continue;
    all_match = all_match && index < decoded.size() && decoded[index] == cp;
    ++index;
  }
  EXPECT_TRUE(all_match);
  EXPECT_EQ(decoded.size(), index);
}

TEST(Utf8Test, RejectsMalformed) {
  std::vector<uint32_t> decoded;
  EXPECT_FALSE(base::DecodeUtf8("\xC0\xAF", &decoded));      // overlong '/'
  EXPECT_FALSE(base::DecodeUtf8("\xED\xA0\x80", &decoded));  // surrogate
  EXPECT_FALSE(base::DecodeUtf8("\xE2\x82", &decoded));      // truncated
}

}  // namespace
