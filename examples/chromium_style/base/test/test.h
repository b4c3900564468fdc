// A minimal gtest-like harness for the example's *_unittests binaries.
//
// TEST() defines a function and a global TestRegistrar whose constructor (a
// static initialiser) adds it to the registry. Each test binary's main()
// calls RunAllTests() with the number of tests it expects, so a test object
// that is dropped from the link, or an initialiser that does not run, fails
// the binary instead of silently shrinking it.

#ifndef BASE_TEST_TEST_H_
#define BASE_TEST_TEST_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace base {
namespace test {

using TestBody = void (*)();

class TestRegistrar {
 public:
  TestRegistrar(const char* suite, const char* name, TestBody body);
};

// Runs every registered test; prints "OK <binary_name>" and returns 0 when all
// pass and exactly |expected_test_count| were registered, else returns 1.
int RunAllTests(const char* binary_name, int expected_test_count);

void RecordFailure(const char* file, int line, const std::string& message);

std::string PrintSigned(int64_t value);
std::string PrintUnsigned(uint64_t value);
std::string PrintDouble(double value);
std::string PrintString(std::string_view value);

template <typename T>
std::string PrintValue(const T& value) {
  if constexpr (std::is_same_v<T, bool>)
    return value ? "true" : "false";
  else if constexpr (std::is_enum_v<T>)
    return PrintSigned(static_cast<int64_t>(value));
  else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>)
    return PrintSigned(value);
  else if constexpr (std::is_integral_v<T>)
    return PrintUnsigned(value);
  else if constexpr (std::is_floating_point_v<T>)
    return PrintDouble(value);
  else if constexpr (std::is_convertible_v<const T&, std::string_view>)
    return PrintString(value);
  else
    return "<unprintable>";
}

// Equality that is exact across signed and unsigned integer types.
template <typename A, typename B>
bool ValuesEqual(const A& a, const B& b) {
  if constexpr (std::is_integral_v<A> && std::is_integral_v<B> &&
                std::is_signed_v<A> != std::is_signed_v<B>) {
    if constexpr (std::is_signed_v<A>)
      return a >= 0 && static_cast<uint64_t>(a) == static_cast<uint64_t>(b);
    else
      return b >= 0 && static_cast<uint64_t>(a) == static_cast<uint64_t>(b);
  } else {
    return a == b;
  }
}

template <typename A, typename B>
void ExpectEq(const A& actual,
              const B& expected,
              const char* actual_text,
              const char* expected_text,
              const char* file,
              int line) {
  if (!ValuesEqual(actual, expected)) {
    RecordFailure(file, line,
                  std::string(actual_text) + " == " + expected_text +
                      ": got " + PrintValue(actual) + ", expected " +
                      PrintValue(expected));
  }
}

void ExpectNear(double actual,
                double expected,
                double tolerance,
                const char* actual_text,
                const char* file,
                int line);

}  // namespace test
}  // namespace base

#define TEST(suite, name)                                              \
  static void suite##_##name##_Test();                                 \
  static const ::base::test::TestRegistrar suite##_##name##_Registrar( \
      #suite, #name, &suite##_##name##_Test);                          \
  static void suite##_##name##_Test()

#define EXPECT_TRUE(condition)                                          \
  do {                                                                  \
    if (!(condition))                                                   \
      ::base::test::RecordFailure(__FILE__, __LINE__,                   \
                                  "expected true: " #condition);        \
  } while (0)

#define EXPECT_FALSE(condition) EXPECT_TRUE(!(condition))

#define EXPECT_EQ(actual, expected) \
  ::base::test::ExpectEq((actual), (expected), #actual, #expected, __FILE__, \
                         __LINE__)

#define EXPECT_NEAR(actual, expected, tolerance)                    \
  ::base::test::ExpectNear((actual), (expected), (tolerance), #actual, \
                           __FILE__, __LINE__)

#endif  // BASE_TEST_TEST_H_
