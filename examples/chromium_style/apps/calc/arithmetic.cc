// Calculator arithmetic.

#include "apps/calc/arithmetic.h"

#include <limits>

namespace calc {
namespace {

int64_t FromUnsigned(uint64_t value) {
  return static_cast<int64_t>(value);
}

uint64_t U(int64_t value) {
  return static_cast<uint64_t>(value);
}

}  // namespace

int64_t WrappingNegate(int64_t value) {
  return FromUnsigned(0 - U(value));
}

bool ApplyBinary(char op,
                 int64_t left,
                 int64_t right,
                 int64_t* result,
                 std::string* error) {
  switch (op) {
    case '+':
      *result = FromUnsigned(U(left) + U(right));
      return true;
    case '-':
      *result = FromUnsigned(U(left) - U(right));
      return true;
    case '*':
      *result = FromUnsigned(U(left) * U(right));
      return true;
    case '/':
    case '%':
      if (right == 0) {
        *error = "division by zero";
        return false;
      }
      if (left == std::numeric_limits<int64_t>::min() && right == -1) {
        *error = "division overflow";
        return false;
      }
      *result = op == '/' ? left / right : left % right;
      return true;
    case '^': {
      if (right < 0) {
        *error = "negative exponent";
        return false;
      }
      uint64_t base = U(left);
      uint64_t exponent = U(right);
      uint64_t product = 1;
      while (exponent != 0) {
        if (exponent & 1)
          product *= base;
        base *= base;
        exponent >>= 1;
      }
      *result = FromUnsigned(product);
      return true;
    }
    default:
      *error = std::string("unknown operator ") + op;
      return false;
  }
}

}  // namespace calc
