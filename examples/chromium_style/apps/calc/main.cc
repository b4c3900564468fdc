// calc: evaluates calculator programs with a tree walker and a bytecode VM,
// and checks both against hard-coded answers.
//
// main() also calls base::ImportMeInline(), the ThinLTO import probe (see
// base/inline_probe.h and README.md).

#include <cstdint>
#include <string>

#include "apps/calc/calculator.h"
#include "base/inline_probe.h"
#include "base/numerics/clamp.h"
#include "base/strings/stringprintf.h"
#include "base/verify.h"

namespace {

struct ValueCase {
  const char* source;
  int64_t expected;
};

// Expected values worked out by hand and checked with Python.
constexpr ValueCase kValueCases[] = {
    {"1 + 2 * 3", 7},
    {"(1 + 2) * 3", 9},
    {"2 ^ 10 - 1", 1023},
    {"-3 ^ 2", -9},
    {"2 ^ 3 ^ 2", 512},
    {"17 % 5 + 100 / 7", 16},
    {"-7 / 2 + -7 % 3", -4},
    {"x = 6; y = x * 7; y - x", 36},
    {"gcd(1071, 462) + max(3, 9, 4) - min(8, -2)", 32},
    {"clamp(500, 0, 255) + isqrt(1000000) + abs(-12)", 1267},
    {"a = 1; b = 1; a = a + b; b = a + b; a = a + b; b = a + b; b", 8},
    {"9223372036854775807 + 1", INT64_MIN},
    {"3 ^ 40", -6289078614652622815},  // 3^40 mod 2^64, as signed
};

struct ErrorCase {
  const char* source;
  const char* expected_error;
};

constexpr ErrorCase kErrorCases[] = {
    {"1 / 0", "division by zero"},
    {"(1 + 2", "expected ')' at 6"},
    {"foo(1)", "unknown function foo"},
    {"y + 1", "unknown variable y"},
    {"1 $ 2", "unexpected character '$' at 2"},
    {"clamp(1, 2)", "clamp() takes 3..3 arguments, got 2"},
};

}  // namespace

int main(int argc, char** argv) {
  base::Verifier verifier("calc");

  for (const ValueCase& c : kValueCases) {
    const calc::CalcResult result = calc::Calculate(c.source);
    verifier.ExpectStrEq(result.error, "", c.source);
    verifier.ExpectEqSigned(result.value, c.expected, c.source);
  }

  for (const ErrorCase& c : kErrorCases) {
    const calc::CalcResult result = calc::Calculate(c.source);
    verifier.ExpectTrue(!result.ok, c.source);
    verifier.ExpectStrEq(result.error, c.expected_error, c.source);
  }

  // Hot loop: one program over many inputs, against a direct computation.
  int64_t interpreted = 0;
  int64_t direct = 0;
  for (int64_t x = 0; x < 2000; ++x) {
    const calc::CalcResult result =
        calc::Calculate("x * x - 3 * x + clamp(x, 10, 500) % 7", {{"x", x}});
    interpreted += result.value;
    direct += x * x - 3 * x + base::Clamp64(x, 10, 500) % 7;
  }
  verifier.ExpectEqSigned(interpreted, direct, "interpreted vs direct");
  verifier.ExpectEqSigned(interpreted, 2658676000, "interpreted sum");

  // The ThinLTO import probe. argc (1 when run without arguments) keeps the
  // loop from being folded to a constant.
  int64_t probe_sum = 0;
  for (int i = 0; i < 1000; ++i)
    probe_sum += base::ImportMeInline(i * argc);
  verifier.ExpectEqSigned(probe_sum, 1499500, "sum of ImportMeInline(0..999)");

  return verifier.Finish();
}
