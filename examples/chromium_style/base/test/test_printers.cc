// Value printing and tolerance checks for test failure messages.

#include <cinttypes>
#include <cmath>
#include <cstdio>

#include "base/test/test.h"

namespace base {
namespace test {

std::string PrintSigned(int64_t value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%" PRId64, value);
  return buffer;
}

std::string PrintUnsigned(uint64_t value) {
  char buffer[48];
  std::snprintf(buffer, sizeof(buffer), "%" PRIu64 " (0x%" PRIx64 ")", value,
                value);
  return buffer;
}

std::string PrintDouble(double value) {
  char buffer[48];
  std::snprintf(buffer, sizeof(buffer), "%.17g", value);
  return buffer;
}

std::string PrintString(std::string_view value) {
  return "\"" + std::string(value) + "\"";
}

void ExpectNear(double actual,
                double expected,
                double tolerance,
                const char* actual_text,
                const char* file,
                int line) {
  if (!(std::fabs(actual - expected) <= tolerance)) {
    RecordFailure(file, line,
                  std::string(actual_text) + ": got " + PrintDouble(actual) +
                      ", expected " + PrintDouble(expected) + " +- " +
                      PrintDouble(tolerance));
  }
}

}  // namespace test
}  // namespace base
