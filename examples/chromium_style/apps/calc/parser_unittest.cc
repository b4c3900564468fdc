// Parser precedence and associativity, checked through the pretty printer.

#include <string>
#include <vector>

#include "apps/calc/parser.h"
#include "apps/calc/pretty_printer.h"
#include "base/test/test.h"

namespace {

std::string Reprint(const char* source) {
  std::vector<calc::NodePtr> statements;
  std::string error;
  if (!calc::Parse(source, &statements, &error))
    return "error: " + error;
  return calc::PrettyPrint(statements);
}

TEST(ParserTest, Precedence) {
  EXPECT_EQ(Reprint("1 + 2 * 3 - 4"), "((1 + (2 * 3)) - 4)");
  EXPECT_EQ(Reprint("-2 ^ 2 ^ 3"), "(-(2 ^ (2 ^ 3)))");
  EXPECT_EQ(Reprint("a = (1 + 2) % b; min(a, 2 * a)"),
            "a = ((1 + 2) % b); min(a, (2 * a))");
}

TEST(ParserTest, Errors) {
  EXPECT_EQ(Reprint("1 +"), "error: expected a number, name or '(' at 3");
  EXPECT_EQ(Reprint("f(1, 2"), "error: expected ')' at 6");
  EXPECT_EQ(Reprint("1 2"), "error: expected ';' at 2");
}

}  // namespace
