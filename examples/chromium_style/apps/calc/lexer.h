// Splits calculator source into tokens.

#ifndef APPS_CALC_LEXER_H_
#define APPS_CALC_LEXER_H_

#include <string>
#include <string_view>
#include <vector>

#include "apps/calc/token.h"

namespace calc {

// Appends the tokens of |source| (ending with kEnd) to |tokens|. On failure
// returns false and describes the problem in |error|.
bool Tokenize(std::string_view source,
              std::vector<Token>* tokens,
              std::string* error);

}  // namespace calc

#endif  // APPS_CALC_LEXER_H_
