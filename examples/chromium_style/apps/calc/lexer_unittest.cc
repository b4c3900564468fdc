// Tests for the calculator lexer.

#include <string>
#include <vector>

#include "apps/calc/lexer.h"
#include "base/test/test.h"

namespace {

TEST(LexerTest, Tokens) {
  std::vector<calc::Token> tokens;
  std::string error;
  EXPECT_TRUE(calc::Tokenize("x1 = max(42, -y_2) ^ 3;", &tokens, &error));
  std::string kinds;
  for (const calc::Token& token : tokens)
    kinds += std::to_string(static_cast<int>(token.type)) + " ";
  // ident assign ident ( number , - ident ) ^ number ; end
  EXPECT_EQ(kinds, "1 11 1 8 0 10 3 1 9 7 0 12 13 ");
  EXPECT_EQ(tokens[4].value, int64_t{42});
  EXPECT_EQ(tokens[7].text, "y_2");
  EXPECT_EQ(tokens[7].position, 14u);
}

TEST(LexerTest, Errors) {
  std::vector<calc::Token> tokens;
  std::string error;
  EXPECT_FALSE(calc::Tokenize("99999999999999999999", &tokens, &error));
  EXPECT_EQ(error, "number too large at 0");
}

}  // namespace
