// Calls of built-in functions.

#include "apps/calc/ast.h"
#include "apps/calc/builtins.h"
#include "apps/calc/bytecode.h"
#include "apps/calc/environment.h"

namespace calc {
namespace {

class CallNode : public Node {
 public:
  CallNode(std::string function, std::vector<NodePtr> arguments)
      : function_(std::move(function)), arguments_(std::move(arguments)) {}

  bool Evaluate(Environment* env, int64_t* result) const override {
    std::vector<int64_t> values(arguments_.size());
    for (size_t i = 0; i < arguments_.size(); ++i) {
      if (!arguments_[i]->Evaluate(env, &values[i]))
        return false;
    }
    std::string error;
    if (!CallBuiltin(function_, values, result, &error)) {
      env->SetError(error);
      return false;
    }
    return true;
  }

  void Compile(Program* program) const override {
    for (const NodePtr& argument : arguments_)
      argument->Compile(program);
    program->Emit(OpCode::kCall, static_cast<int64_t>(arguments_.size()),
                  function_);
  }

  void Print(std::string* out) const override {
    out->append(function_);
    out->push_back('(');
    for (size_t i = 0; i < arguments_.size(); ++i) {
      if (i != 0)
        out->append(", ");
      arguments_[i]->Print(out);
    }
    out->push_back(')');
  }

 private:
  std::string function_;
  std::vector<NodePtr> arguments_;
};

}  // namespace

NodePtr MakeCall(std::string function, std::vector<NodePtr> arguments) {
  return std::make_unique<CallNode>(std::move(function), std::move(arguments));
}

}  // namespace calc
