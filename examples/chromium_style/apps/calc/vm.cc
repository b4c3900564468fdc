// Stack-machine interpreter.

#include "apps/calc/vm.h"

#include "apps/calc/arithmetic.h"
#include "apps/calc/builtins.h"

namespace calc {

Program CompileStatements(const std::vector<NodePtr>& statements) {
  Program program;
  for (size_t i = 0; i < statements.size(); ++i) {
    if (i != 0)
      program.Emit(OpCode::kPop);
    statements[i]->Compile(&program);
  }
  return program;
}

bool RunProgram(const Program& program, Environment* env, int64_t* result) {
  std::vector<int64_t> stack;
  for (const Instruction& instruction : program.code) {
    switch (instruction.op) {
      case OpCode::kPush:
        stack.push_back(instruction.operand);
        break;
      case OpCode::kLoad: {
        int64_t value = 0;
        if (!env->Get(instruction.name, &value))
          return false;
        stack.push_back(value);
        break;
      }
      case OpCode::kStore:
        env->Set(instruction.name, stack.back());
        break;
      case OpCode::kPop:
        stack.pop_back();
        break;
      case OpCode::kNegate:
        stack.back() = WrappingNegate(stack.back());
        break;
      case OpCode::kCall: {
        const size_t argc = static_cast<size_t>(instruction.operand);
        std::vector<int64_t> arguments(stack.end() - argc, stack.end());
        stack.resize(stack.size() - argc);
        int64_t value = 0;
        std::string error;
        if (!CallBuiltin(instruction.name, arguments, &value, &error)) {
          env->SetError(error);
          return false;
        }
        stack.push_back(value);
        break;
      }
      default: {
        const int64_t right = stack.back();
        stack.pop_back();
        std::string error;
        if (!ApplyBinary(OperatorForOpCode(instruction.op), stack.back(),
                         right, &stack.back(), &error)) {
          env->SetError(error);
          return false;
        }
        break;
      }
    }
  }
  if (stack.size() != 1) {
    env->SetError("internal error: unbalanced stack");
    return false;
  }
  *result = stack.back();
  return true;
}

}  // namespace calc
