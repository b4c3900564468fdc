// Integer determinants, by two independent algorithms.

#ifndef TOOLS_MATRIX_TOOL_DETERMINANT_H_
#define TOOLS_MATRIX_TOOL_DETERMINANT_H_

#include <cstdint>

#include "tools/matrix_tool/matrix.h"

namespace matrix_tool {

// Fraction-free Gaussian elimination (Bareiss); exact for small entries.
int64_t DeterminantBareiss(const Matrix<int64_t>& m);

// Laplace expansion along the first row; exponential, for small matrices.
int64_t DeterminantLaplace(const Matrix<int64_t>& m);

}  // namespace matrix_tool

#endif  // TOOLS_MATRIX_TOOL_DETERMINANT_H_
