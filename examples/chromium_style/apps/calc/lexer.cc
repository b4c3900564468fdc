// Calculator lexer.

#include "apps/calc/lexer.h"

#include "base/strings/string_number_conversions.h"
#include "base/strings/string_util.h"
#include "base/strings/stringprintf.h"

namespace calc {
namespace {

bool SingleCharToken(char c, TokenType* type) {
  switch (c) {
    case '+': *type = TokenType::kPlus; return true;
    case '-': *type = TokenType::kMinus; return true;
    case '*': *type = TokenType::kStar; return true;
    case '/': *type = TokenType::kSlash; return true;
    case '%': *type = TokenType::kPercent; return true;
    case '^': *type = TokenType::kCaret; return true;
    case '(': *type = TokenType::kLeftParen; return true;
    case ')': *type = TokenType::kRightParen; return true;
    case ',': *type = TokenType::kComma; return true;
    case '=': *type = TokenType::kAssign; return true;
    case ';': *type = TokenType::kSemicolon; return true;
    default: return false;
  }
}

}  // namespace

bool Tokenize(std::string_view source,
              std::vector<Token>* tokens,
              std::string* error) {
  size_t i = 0;
  while (i < source.size()) {
    const char c = source[i];
    if (base::IsAsciiWhitespace(c)) {
      ++i;
      continue;
    }
    Token token;
    token.position = i;
    if (base::IsAsciiDigit(c)) {
      size_t end = i;
      while (end < source.size() && base::IsAsciiDigit(source[end]))
        ++end;
      token.type = TokenType::kNumber;
      token.text = std::string(source.substr(i, end - i));
      if (!base::StringToInt64(token.text, &token.value)) {
        *error = base::StringPrintf("number too large at %zu", i);
        return false;
      }
      i = end;
    } else if (base::IsAsciiAlpha(c) || c == '_') {
      size_t end = i;
      while (end < source.size() &&
             (base::IsAsciiAlpha(source[end]) ||
              base::IsAsciiDigit(source[end]) || source[end] == '_')) {
        ++end;
      }
      token.type = TokenType::kIdentifier;
      token.text = std::string(source.substr(i, end - i));
      i = end;
    } else if (SingleCharToken(c, &token.type)) {
      token.text = std::string(1, c);
      ++i;
    } else {
      *error = base::StringPrintf("unexpected character '%c' at %zu", c, i);
      return false;
    }
    tokens->push_back(std::move(token));
  }
  Token end;
  end.type = TokenType::kEnd;
  end.position = source.size();
  tokens->push_back(std::move(end));
  return true;
}

}  // namespace calc
