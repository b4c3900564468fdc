// 64-bit integer arithmetic of the calculator: + - * wrap around (two's
// complement), / and % truncate and reject zero and INT64_MIN / -1, and ^
// is exponentiation by squaring (wrapping) with a non-negative exponent.

#ifndef APPS_CALC_ARITHMETIC_H_
#define APPS_CALC_ARITHMETIC_H_

#include <cstdint>
#include <string>

namespace calc {

bool ApplyBinary(char op,
                 int64_t left,
                 int64_t right,
                 int64_t* result,
                 std::string* error);

int64_t WrappingNegate(int64_t value);

}  // namespace calc

#endif  // APPS_CALC_ARITHMETIC_H_
