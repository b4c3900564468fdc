// Tests for base/strings/.

#include <string>
#include <vector>

#include "base/json/json_escape.h"
#include "base/strings/string_number_conversions.h"
#include "base/strings/string_util.h"
#include "base/strings/stringprintf.h"
#include "base/test/test.h"

namespace {

TEST(StringUtilTest, CaseAndTrim) {
  EXPECT_EQ(base::ToUpperASCII("Hello, World 42"), "HELLO, WORLD 42");
  EXPECT_EQ(base::TrimWhitespaceASCII("  \t padded \n"), "padded");
  EXPECT_EQ(base::TrimWhitespaceASCII("   "), "");
  EXPECT_TRUE(base::StartsWith("chromium", "chrom"));
  EXPECT_FALSE(base::StartsWith("chr", "chrom"));
}

TEST(StringUtilTest, SplitJoinReplace) {
  const std::vector<std::string_view> pieces =
      base::SplitStringPiece("a,,b,c", ',');
  EXPECT_EQ(pieces.size(), 4u);
  EXPECT_EQ(pieces[1], "");
  EXPECT_EQ(pieces[3], "c");
  EXPECT_EQ(base::JoinStrings({"x", "y", "z"}, " + "), "x + y + z");
  EXPECT_EQ(base::ReplaceAll("one two one", "one", "1"), "1 two 1");
}

TEST(StringNumberConversionsTest, RoundTrip) {
  EXPECT_EQ(base::NumberToString(0), "0");
  EXPECT_EQ(base::NumberToString(-9223372036854775807 - 1),
            "-9223372036854775808");
  int64_t value = 0;
  EXPECT_TRUE(base::StringToInt64("-12345", &value));
  EXPECT_EQ(value, int64_t{-12345});
  EXPECT_TRUE(base::StringToInt64("9223372036854775807", &value));
  EXPECT_FALSE(base::StringToInt64("9223372036854775808", &value));
  EXPECT_FALSE(base::StringToInt64("12a", &value));
  EXPECT_FALSE(base::StringToInt64("-", &value));
  const unsigned char bytes[] = {0x00, 0x7F, 0xAB, 0xFF};
  EXPECT_EQ(base::HexEncodeLower(bytes, sizeof(bytes)), "007fabff");
}

TEST(StringPrintfTest, Formats) {
  EXPECT_EQ(base::StringPrintf("%d-%s-%.2f", 7, "x", 2.5), "7-x-2.50");
  EXPECT_EQ(base::StringPrintf("%08x", 0xBEEFu), "0000beef");
  const std::string long_text(1000, 'q');
  EXPECT_EQ(base::StringPrintf("<%s>", long_text.c_str()).size(), 1002u);
}

TEST(JsonEscapeTest, Escapes) {
  EXPECT_EQ(base::EscapeJSONString("a\"b\\c\n\x01"),
            "\"a\\\"b\\\\c\\n\\u0001\"");
}

}  // namespace
