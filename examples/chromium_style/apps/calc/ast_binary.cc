// Binary operators.

#include "apps/calc/arithmetic.h"
#include "apps/calc/ast.h"
#include "apps/calc/bytecode.h"
#include "apps/calc/environment.h"

namespace calc {
namespace {

class BinaryNode : public Node {
 public:
  BinaryNode(char op, NodePtr left, NodePtr right)
      : op_(op), left_(std::move(left)), right_(std::move(right)) {}

  bool Evaluate(Environment* env, int64_t* result) const override {
    int64_t left = 0, right = 0;
    if (!left_->Evaluate(env, &left) || !right_->Evaluate(env, &right))
      return false;
    std::string error;
    if (!ApplyBinary(op_, left, right, result, &error)) {
      env->SetError(error);
      return false;
    }
    return true;
  }

  void Compile(Program* program) const override {
    left_->Compile(program);
    right_->Compile(program);
    program->Emit(OpCodeForOperator(op_));
  }

  void Print(std::string* out) const override {
    out->push_back('(');
    left_->Print(out);
    out->push_back(' ');
    out->push_back(op_);
    out->push_back(' ');
    right_->Print(out);
    out->push_back(')');
  }

 private:
  char op_;
  NodePtr left_;
  NodePtr right_;
};

}  // namespace

NodePtr MakeBinary(char op, NodePtr left, NodePtr right) {
  return std::make_unique<BinaryNode>(op, std::move(left), std::move(right));
}

}  // namespace calc
