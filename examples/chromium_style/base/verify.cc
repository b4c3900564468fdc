// Self-check reporting.

#include "base/verify.h"

#include <cinttypes>
#include <cstdio>

namespace base {

Verifier::Verifier(const char* binary_name) : binary_name_(binary_name) {}

void Verifier::ExpectTrue(bool condition, const char* what) {
  ++checks_;
  if (!condition) {
    ++failures_;
    std::printf("FAIL %s: %s\n", binary_name_, what);
  }
}

void Verifier::ExpectEq(uint64_t actual, uint64_t expected, const char* what) {
  ++checks_;
  if (actual != expected) {
    ++failures_;
    std::printf("FAIL %s: %s: got 0x%" PRIx64 " (%" PRIu64
                "), expected 0x%" PRIx64 " (%" PRIu64 ")\n",
                binary_name_, what, actual, actual, expected, expected);
  }
}

void Verifier::ExpectEqSigned(int64_t actual,
                              int64_t expected,
                              const char* what) {
  ++checks_;
  if (actual != expected) {
    ++failures_;
    std::printf("FAIL %s: %s: got %" PRId64 ", expected %" PRId64 "\n",
                binary_name_, what, actual, expected);
  }
}

void Verifier::ExpectStrEq(std::string_view actual,
                           std::string_view expected,
                           const char* what) {
  ++checks_;
  if (actual != expected) {
    ++failures_;
    std::printf("FAIL %s: %s:\n  got      \"%.*s\"\n  expected \"%.*s\"\n",
                binary_name_, what, static_cast<int>(actual.size()),
                actual.data(), static_cast<int>(expected.size()),
                expected.data());
  }
}

int Verifier::Finish() {
  if (checks_ == 0) {
    std::printf("FAIL %s: no checks ran\n", binary_name_);
    return 1;
  }
  if (failures_ != 0) {
    std::printf("FAILED %s: %d of %d checks failed\n", binary_name_, failures_,
                checks_);
    return 1;
  }
  std::printf("OK %s\n", binary_name_);
  return 0;
}

}  // namespace base
