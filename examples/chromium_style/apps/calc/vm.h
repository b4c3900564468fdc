// Stack-machine interpreter for compiled calculator programs.

#ifndef APPS_CALC_VM_H_
#define APPS_CALC_VM_H_

#include <cstdint>
#include <vector>

#include "apps/calc/ast.h"
#include "apps/calc/bytecode.h"
#include "apps/calc/environment.h"

namespace calc {

// Compiles statements into one program whose result is the value of the
// last statement.
Program CompileStatements(const std::vector<NodePtr>& statements);

// Runs |program|; on failure returns false and sets the error in |env|.
bool RunProgram(const Program& program, Environment* env, int64_t* result);

}  // namespace calc

#endif  // APPS_CALC_VM_H_
