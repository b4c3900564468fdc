// Variable references and assignments.

#include "apps/calc/ast.h"
#include "apps/calc/bytecode.h"
#include "apps/calc/environment.h"

namespace calc {
namespace {

class VariableNode : public Node {
 public:
  explicit VariableNode(std::string name) : name_(std::move(name)) {}

  bool Evaluate(Environment* env, int64_t* result) const override {
    return env->Get(name_, result);
  }

  void Compile(Program* program) const override {
    program->Emit(OpCode::kLoad, 0, name_);
  }

  void Print(std::string* out) const override { out->append(name_); }

 private:
  std::string name_;
};

class AssignmentNode : public Node {
 public:
  AssignmentNode(std::string name, NodePtr value)
      : name_(std::move(name)), value_(std::move(value)) {}

  bool Evaluate(Environment* env, int64_t* result) const override {
    if (!value_->Evaluate(env, result))
      return false;
    env->Set(name_, *result);
    return true;
  }

  void Compile(Program* program) const override {
    value_->Compile(program);
    program->Emit(OpCode::kStore, 0, name_);
  }

  void Print(std::string* out) const override {
    out->append(name_);
    out->append(" = ");
    value_->Print(out);
  }

 private:
  std::string name_;
  NodePtr value_;
};

}  // namespace

NodePtr MakeVariable(std::string name) {
  return std::make_unique<VariableNode>(std::move(name));
}

NodePtr MakeAssignment(std::string name, NodePtr value) {
  return std::make_unique<AssignmentNode>(std::move(name), std::move(value));
}

}  // namespace calc
