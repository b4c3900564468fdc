// Unary minus.

#include "apps/calc/arithmetic.h"
#include "apps/calc/ast.h"
#include "apps/calc/bytecode.h"

namespace calc {
namespace {

class NegateNode : public Node {
 public:
  explicit NegateNode(NodePtr operand) : operand_(std::move(operand)) {}

  bool Evaluate(Environment* env, int64_t* result) const override {
    int64_t value = 0;
    if (!operand_->Evaluate(env, &value))
      return false;
    *result = WrappingNegate(value);
    return true;
  }

  void Compile(Program* program) const override {
    operand_->Compile(program);
    program->Emit(OpCode::kNegate);
  }

  void Print(std::string* out) const override {
    out->append("(-");
    operand_->Print(out);
    out->push_back(')');
  }

 private:
  NodePtr operand_;
};

}  // namespace

NodePtr MakeNegate(NodePtr operand) {
  return std::make_unique<NegateNode>(std::move(operand));
}

}  // namespace calc
