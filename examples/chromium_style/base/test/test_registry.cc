// Test registration (by static initialisers) and the test runner.

#include <cstdio>

#include "base/test/test.h"

namespace base {
namespace test {
namespace {

struct TestCase {
  const char* suite;
  const char* name;
  TestBody body;
};

constexpr int kMaxTests = 256;

// Constant-initialised (no constructor), so registrars in other translation
// units can use it regardless of static initialisation order.
TestCase g_tests[kMaxTests];
int g_test_count = 0;
bool g_registry_overflow = false;

int g_failures_in_current_test = 0;

}  // namespace

TestRegistrar::TestRegistrar(const char* suite, const char* name,
                             TestBody body) {
  if (g_test_count == kMaxTests) {
    g_registry_overflow = true;
    return;
  }
  g_tests[g_test_count++] = TestCase{suite, name, body};
}

void RecordFailure(const char* file, int line, const std::string& message) {
  ++g_failures_in_current_test;
  std::printf("%s:%d: Failure: %s\n", file, line, message.c_str());
}

int RunAllTests(const char* binary_name, int expected_test_count) {
  int failed_tests = 0;
  for (int i = 0; i < g_test_count; ++i) {
    g_failures_in_current_test = 0;
    g_tests[i].body();
    if (g_failures_in_current_test != 0) {
      ++failed_tests;
      std::printf("FAILED test %s.%s\n", g_tests[i].suite, g_tests[i].name);
    }
  }
  bool ok = failed_tests == 0;
  if (g_registry_overflow) {
    std::printf("FAILED %s: more than %d tests registered\n", binary_name,
                kMaxTests);
    ok = false;
  }
  if (g_test_count != expected_test_count) {
    std::printf("FAILED %s: %d tests registered, expected %d\n", binary_name,
                g_test_count, expected_test_count);
    ok = false;
  }
  if (!ok) {
    std::printf("FAILED %s: %d of %d tests failed\n", binary_name,
                failed_tests, g_test_count);
    return 1;
  }
  std::printf("OK %s\n", binary_name);
  return 0;
}

}  // namespace test
}  // namespace base
