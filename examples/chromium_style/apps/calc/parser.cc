// Recursive-descent parser.

#include "apps/calc/parser.h"

#include "apps/calc/lexer.h"
#include "base/strings/stringprintf.h"

namespace calc {
namespace {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  bool ParseProgram(std::vector<NodePtr>* statements) {
    while (true) {
      NodePtr statement = ParseStatement();
      if (!statement)
        return false;
      statements->push_back(std::move(statement));
      if (Peek().type == TokenType::kEnd)
        return true;
      if (!Expect(TokenType::kSemicolon, "';'"))
        return false;
    }
  }

  const std::string& error() const { return error_; }

 private:
  const Token& Peek(size_t ahead = 0) const {
    const size_t index = position_ + ahead;
    return tokens_[index < tokens_.size() ? index : tokens_.size() - 1];
  }

  const Token& Advance() { return tokens_[position_++]; }

  bool Expect(TokenType type, const char* what) {
    if (Peek().type != type)
      return Fail(what);
    Advance();
    return true;
  }

  bool Fail(const char* expected) {
    if (error_.empty()) {
      error_ = base::StringPrintf("expected %s at %zu", expected,
                                  Peek().position);
    }
    return false;
  }

  NodePtr ParseStatement() {
    if (Peek().type == TokenType::kIdentifier &&
        Peek(1).type == TokenType::kAssign) {
      std::string name = Advance().text;
      Advance();
      NodePtr value = ParseExpression();
      return value ? MakeAssignment(std::move(name), std::move(value))
                   : nullptr;
    }
    return ParseExpression();
  }

  NodePtr ParseExpression() {
    NodePtr left = ParseTerm();
    while (left && (Peek().type == TokenType::kPlus ||
                    Peek().type == TokenType::kMinus)) {
      const char op = Advance().text[0];
      NodePtr right = ParseTerm();
      if (!right)
        return nullptr;
      left = MakeBinary(op, std::move(left), std::move(right));
    }
    return left;
  }

  NodePtr ParseTerm() {
    NodePtr left = ParseUnary();
    while (left && (Peek().type == TokenType::kStar ||
                    Peek().type == TokenType::kSlash ||
                    Peek().type == TokenType::kPercent)) {
      const char op = Advance().text[0];
      NodePtr right = ParseUnary();
      if (!right)
        return nullptr;
      left = MakeBinary(op, std::move(left), std::move(right));
    }
    return left;
  }

  NodePtr ParseUnary() {
    if (Peek().type == TokenType::kMinus) {
      Advance();
      NodePtr operand = ParseUnary();
      return operand ? MakeNegate(std::move(operand)) : nullptr;
    }
    return ParsePower();
  }

  NodePtr ParsePower() {
    NodePtr base = ParsePrimary();
    if (base && Peek().type == TokenType::kCaret) {
      Advance();
      NodePtr exponent = ParseUnary();
      if (!exponent)
        return nullptr;
      return MakeBinary('^', std::move(base), std::move(exponent));
    }
    return base;
  }

  NodePtr ParsePrimary() {
    const Token& token = Peek();
    switch (token.type) {
      case TokenType::kNumber:
        return MakeNumber(Advance().value);
      case TokenType::kIdentifier: {
        std::string name = Advance().text;
        if (Peek().type != TokenType::kLeftParen)
          return MakeVariable(std::move(name));
        Advance();
        std::vector<NodePtr> arguments;
        if (Peek().type != TokenType::kRightParen) {
          while (true) {
            NodePtr argument = ParseExpression();
            if (!argument)
              return nullptr;
            arguments.push_back(std::move(argument));
            if (Peek().type != TokenType::kComma)
              break;
            Advance();
          }
        }
        if (!Expect(TokenType::kRightParen, "')'"))
          return nullptr;
        return MakeCall(std::move(name), std::move(arguments));
      }
      case TokenType::kLeftParen: {
        Advance();
        NodePtr inner = ParseExpression();
        if (!inner || !Expect(TokenType::kRightParen, "')'"))
          return nullptr;
        return inner;
      }
      default:
        Fail("a number, name or '('");
        return nullptr;
    }
  }

  std::vector<Token> tokens_;
  size_t position_ = 0;
  std::string error_;
};

}  // namespace

bool Parse(std::string_view source,
           std::vector<NodePtr>* statements,
           std::string* error) {
  std::vector<Token> tokens;
  if (!Tokenize(source, &tokens, error))
    return false;
  Parser parser(std::move(tokens));
  if (!parser.ParseProgram(statements)) {
    *error = parser.error();
    return false;
  }
  return true;
}

}  // namespace calc
