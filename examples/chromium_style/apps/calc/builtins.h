// Built-in functions: abs(x), min(x, ...), max(x, ...), gcd(a, b),
// clamp(x, lo, hi), isqrt(x).

#ifndef APPS_CALC_BUILTINS_H_
#define APPS_CALC_BUILTINS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace calc {

bool CallBuiltin(std::string_view name,
                 const std::vector<int64_t>& arguments,
                 int64_t* result,
                 std::string* error);

}  // namespace calc

#endif  // APPS_CALC_BUILTINS_H_
