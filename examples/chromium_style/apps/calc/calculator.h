// Runs a calculator program both ways (tree walk and bytecode VM) and
// reports whether they agree.

#ifndef APPS_CALC_CALCULATOR_H_
#define APPS_CALC_CALCULATOR_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace calc {

struct CalcResult {
  bool ok = false;
  int64_t value = 0;
  // Empty when ok; otherwise the parse or evaluation error (both evaluators
  // must report the same one).
  std::string error;
};

// |variables| are predefined in both evaluators' environments.
CalcResult Calculate(
    std::string_view source,
    const std::vector<std::pair<std::string, int64_t>>& variables = {});

}  // namespace calc

#endif  // APPS_CALC_CALCULATOR_H_
