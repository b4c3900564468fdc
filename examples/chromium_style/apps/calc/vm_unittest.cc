// Bytecode generation and the VM.

#include <string>
#include <vector>

#include "apps/calc/calculator.h"
#include "apps/calc/parser.h"
#include "apps/calc/vm.h"
#include "base/test/test.h"

namespace {

TEST(VmTest, Disassembly) {
  std::vector<calc::NodePtr> statements;
  std::string error;
  EXPECT_TRUE(calc::Parse("x = 2; max(x, -3) * 4", &statements, &error));
  EXPECT_EQ(calc::CompileStatements(statements).Disassemble(),
            "push 2\nstore x\npop\nload x\npush 3\nneg\ncall max/2\n"
            "push 4\nop *\n");
}

TEST(VmTest, AgreesWithTreeWalker) {
  // Calculate() fails if the two evaluators disagree.
  const calc::CalcResult result = calc::Calculate(
      "a = 5; b = a ^ 3 - 2 * a; c = gcd(b, 45) + abs(-a); c * b % 1000");
  EXPECT_EQ(result.error, "");
  EXPECT_EQ(result.value, int64_t{150});  // b = 115, c = 10
}

TEST(VmTest, Errors) {
  EXPECT_EQ(calc::Calculate("x = 1; x / (x - 1)").error, "division by zero");
  EXPECT_EQ(calc::Calculate("2 ^ -1").error, "negative exponent");
  EXPECT_EQ(calc::Calculate("q", {{"q", 77}}).value, int64_t{77});
}

}  // namespace
