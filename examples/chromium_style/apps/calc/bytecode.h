// Stack-machine code produced by Node::Compile() and run by vm.h.

#ifndef APPS_CALC_BYTECODE_H_
#define APPS_CALC_BYTECODE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace calc {

enum class OpCode {
  kPush,    // operand: the value
  kLoad,    // name: the variable
  kStore,   // name: the variable; leaves the value on the stack
  kPop,
  kAdd,
  kSubtract,
  kMultiply,
  kDivide,
  kModulo,
  kPower,
  kNegate,
  kCall,    // operand: argument count, name: the function
};

struct Instruction {
  OpCode op;
  int64_t operand = 0;
  std::string name;
};

struct Program {
  void Emit(OpCode op, int64_t operand = 0, std::string name = std::string());

  // One instruction per line, e.g. "push 3", "call max/2".
  std::string Disassemble() const;

  std::vector<Instruction> code;
};

OpCode OpCodeForOperator(char op);

// The operator character of an arithmetic opcode ('+', ...), or 0.
char OperatorForOpCode(OpCode op);

}  // namespace calc

#endif  // APPS_CALC_BYTECODE_H_
