// Self-check reporting for the example's app and tool binaries.
//
// A binary records every comparison with a Verifier and returns Finish() from
// main(): it prints "OK <name>" and returns 0 when everything matched, and
// otherwise prints each mismatch and returns 1.

#ifndef BASE_VERIFY_H_
#define BASE_VERIFY_H_

#include <cstdint>
#include <string_view>

namespace base {

class Verifier {
 public:
  explicit Verifier(const char* binary_name);

  void ExpectTrue(bool condition, const char* what);
  void ExpectEq(uint64_t actual, uint64_t expected, const char* what);
  void ExpectEqSigned(int64_t actual, int64_t expected, const char* what);
  void ExpectStrEq(std::string_view actual,
                   std::string_view expected,
                   const char* what);

  int failures() const { return failures_; }

  // Prints the verdict; returns the process exit code.
  int Finish();

 private:
  const char* binary_name_;
  int checks_ = 0;
  int failures_ = 0;
};

}  // namespace base

#endif  // BASE_VERIFY_H_
