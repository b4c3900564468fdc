// Integer literals (and Node's key function).

#include "apps/calc/ast.h"
#include "apps/calc/bytecode.h"
#include "base/strings/string_number_conversions.h"

namespace calc {

Node::~Node() = default;

namespace {

class NumberNode : public Node {
 public:
  explicit NumberNode(int64_t value) : value_(value) {}

  bool Evaluate(Environment* env, int64_t* result) const override {
    *result = value_;
    return true;
  }

  void Compile(Program* program) const override {
    program->Emit(OpCode::kPush, value_);
  }

  void Print(std::string* out) const override {
    out->append(base::NumberToString(value_));
  }

 private:
  int64_t value_;
};

}  // namespace

NodePtr MakeNumber(int64_t value) {
  return std::make_unique<NumberNode>(value);
}

}  // namespace calc
