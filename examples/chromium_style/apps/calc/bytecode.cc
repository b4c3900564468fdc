// Program construction and disassembly.

#include "apps/calc/bytecode.h"

#include "base/check.h"
#include "base/strings/stringprintf.h"

namespace calc {
namespace {

struct OperatorEntry {
  char op;
  OpCode opcode;
};

constexpr OperatorEntry kOperators[] = {
    {'+', OpCode::kAdd},      {'-', OpCode::kSubtract},
    {'*', OpCode::kMultiply}, {'/', OpCode::kDivide},
    {'%', OpCode::kModulo},   {'^', OpCode::kPower},
};

}  // namespace

void Program::Emit(OpCode op, int64_t operand, std::string name) {
  code.push_back(Instruction{op, operand, std::move(name)});
}

OpCode OpCodeForOperator(char op) {
  for (const OperatorEntry& entry : kOperators) {
    if (entry.op == op)
      return entry.opcode;
  }
  CHECK(false);
}

char OperatorForOpCode(OpCode opcode) {
  for (const OperatorEntry& entry : kOperators) {
    if (entry.opcode == opcode)
      return entry.op;
  }
  return 0;
}

std::string Program::Disassemble() const {
  std::string out;
  for (const Instruction& instruction : code) {
    switch (instruction.op) {
      case OpCode::kPush:
        out += base::StringPrintf("push %lld\n",
                                  static_cast<long long>(instruction.operand));
        break;
      case OpCode::kLoad:
        out += "load " + instruction.name + "\n";
        break;
      case OpCode::kStore:
        out += "store " + instruction.name + "\n";
        break;
      case OpCode::kPop:
        out += "pop\n";
        break;
      case OpCode::kNegate:
        out += "neg\n";
        break;
      case OpCode::kCall:
        out += base::StringPrintf("call %s/%lld\n", instruction.name.c_str(),
                                  static_cast<long long>(instruction.operand));
        break;
      default:
        out += base::StringPrintf("op %c\n", OperatorForOpCode(instruction.op));
        break;
    }
  }
  return out;
}

}  // namespace calc
