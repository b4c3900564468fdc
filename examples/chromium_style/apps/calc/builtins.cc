// Built-in functions, dispatched through a table.

#include "apps/calc/builtins.h"

#include "apps/calc/arithmetic.h"
#include "base/math/gcd.h"
#include "base/math/isqrt.h"
#include "base/numerics/clamp.h"
#include "base/strings/stringprintf.h"

namespace calc {
namespace {

using BuiltinFn = int64_t (*)(const std::vector<int64_t>& args);

int64_t Abs(const std::vector<int64_t>& args) {
  return args[0] < 0 ? WrappingNegate(args[0]) : args[0];
}

int64_t Min(const std::vector<int64_t>& args) {
  int64_t best = args[0];
  for (int64_t v : args)
    best = v < best ? v : best;
  return best;
}

int64_t Max(const std::vector<int64_t>& args) {
  int64_t best = args[0];
  for (int64_t v : args)
    best = v > best ? v : best;
  return best;
}

int64_t GcdFn(const std::vector<int64_t>& args) {
  return base::Gcd(args[0], args[1]);
}

int64_t ClampFn(const std::vector<int64_t>& args) {
  return base::Clamp64(args[0], args[1], args[2]);
}

int64_t ISqrtFn(const std::vector<int64_t>& args) {
  return args[0] < 0 ? -1
                     : static_cast<int64_t>(
                           base::ISqrt(static_cast<uint64_t>(args[0])));
}

struct Builtin {
  const char* name;
  size_t min_arguments;
  size_t max_arguments;
  BuiltinFn function;
};

constexpr size_t kVariadic = 64;

constexpr Builtin kBuiltins[] = {
    {"abs", 1, 1, &Abs},         {"min", 1, kVariadic, &Min},
    {"max", 1, kVariadic, &Max}, {"gcd", 2, 2, &GcdFn},
    {"clamp", 3, 3, &ClampFn},   {"isqrt", 1, 1, &ISqrtFn},
};

}  // namespace

bool CallBuiltin(std::string_view name,
                 const std::vector<int64_t>& arguments,
                 int64_t* result,
                 std::string* error) {
  for (const Builtin& builtin : kBuiltins) {
    if (name != builtin.name)
      continue;
    if (arguments.size() < builtin.min_arguments ||
        arguments.size() > builtin.max_arguments) {
      *error = base::StringPrintf("%s() takes %zu..%zu arguments, got %zu",
                                  builtin.name, builtin.min_arguments,
                                  builtin.max_arguments, arguments.size());
      return false;
    }
    if (name == "clamp" && arguments[1] > arguments[2]) {
      *error = "clamp() needs lo <= hi";
      return false;
    }
    *result = builtin.function(arguments);
    return true;
  }
  *error = "unknown function " + std::string(name);
  return false;
}

}  // namespace calc
