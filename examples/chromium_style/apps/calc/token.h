// Tokens of the calculator language.

#ifndef APPS_CALC_TOKEN_H_
#define APPS_CALC_TOKEN_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace calc {

enum class TokenType {
  kNumber,
  kIdentifier,
  kPlus,
  kMinus,
  kStar,
  kSlash,
  kPercent,
  kCaret,
  kLeftParen,
  kRightParen,
  kComma,
  kAssign,
  kSemicolon,
  kEnd,
};

struct Token {
  TokenType type = TokenType::kEnd;
  std::string text;
  int64_t value = 0;  // For kNumber.
  size_t position = 0;
};

}  // namespace calc

#endif  // APPS_CALC_TOKEN_H_
