// Recursive-descent parser for the calculator language:
//
//   program   := statement (';' statement)*
//   statement := IDENT '=' expr | expr
//   expr      := term (('+' | '-') term)*
//   term      := unary (('*' | '/' | '%') unary)*
//   unary     := '-' unary | power
//   power     := primary ('^' unary)?          (right associative)
//   primary   := NUMBER | IDENT | IDENT '(' [expr (',' expr)*] ')'
//              | '(' expr ')'

#ifndef APPS_CALC_PARSER_H_
#define APPS_CALC_PARSER_H_

#include <string>
#include <string_view>
#include <vector>

#include "apps/calc/ast.h"

namespace calc {

// Parses |source| into statements. On failure returns false and sets |error|.
bool Parse(std::string_view source,
           std::vector<NodePtr>* statements,
           std::string* error);

}  // namespace calc

#endif  // APPS_CALC_PARSER_H_
