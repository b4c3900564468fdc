// Abstract syntax tree of the calculator. Each node kind is implemented in
// its own ast_*.cc file; everything else sees only this interface.

#ifndef APPS_CALC_AST_H_
#define APPS_CALC_AST_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace calc {

class Environment;
struct Program;

class Node {
 public:
  virtual ~Node();

  // Tree-walking evaluation. On failure returns false and sets the error in
  // |env|.
  virtual bool Evaluate(Environment* env, int64_t* result) const = 0;

  // Appends stack-machine code that leaves the node's value on the stack.
  virtual void Compile(Program* program) const = 0;

  // Appends a fully parenthesised rendering.
  virtual void Print(std::string* out) const = 0;
};

using NodePtr = std::unique_ptr<Node>;

NodePtr MakeNumber(int64_t value);
NodePtr MakeVariable(std::string name);
NodePtr MakeAssignment(std::string name, NodePtr value);
// |op| is one of + - * / % ^.
NodePtr MakeBinary(char op, NodePtr left, NodePtr right);
NodePtr MakeNegate(NodePtr operand);
NodePtr MakeCall(std::string function, std::vector<NodePtr> arguments);

}  // namespace calc

#endif  // APPS_CALC_AST_H_
