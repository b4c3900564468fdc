// Dense linear solve with partial pivoting.

#ifndef TOOLS_MATRIX_TOOL_LINEAR_SOLVE_H_
#define TOOLS_MATRIX_TOOL_LINEAR_SOLVE_H_

#include <vector>

#include "tools/matrix_tool/matrix.h"

namespace matrix_tool {

// Solves a x = b; returns false if |a| is singular (to working precision).
bool SolveLinearSystem(Matrix<double> a,
                       std::vector<double> b,
                       std::vector<double>* x);

}  // namespace matrix_tool

#endif  // TOOLS_MATRIX_TOOL_LINEAR_SOLVE_H_
