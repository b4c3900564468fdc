// matrix_tool: integer and floating-point matrix work checked against values
// computed independently (Python with exact fractions) and against second
// implementations.

#include <cmath>
#include <cstdint>
#include <vector>

#include "base/hash/hash_combine.h"
#include "base/rand/xorshift.h"
#include "base/verify.h"
#include "tools/matrix_tool/determinant.h"
#include "tools/matrix_tool/linear_solve.h"
#include "tools/matrix_tool/matrix.h"

#ifndef MATRIX_TOOL_NAME
#define MATRIX_TOOL_NAME "matrix_tool"  // matrix_tool_lto_o0 sets its own
#endif

namespace {

using matrix_tool::Matrix;

// Entries base::XorShift32(seed).NextBelow(2 * bound + 1) - bound, row-major.
Matrix<int64_t> RandomMatrix(base::XorShift32* rng, size_t n, int bound) {
  Matrix<int64_t> m(n, n);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j)
      m(i, j) = static_cast<int64_t>(rng->NextBelow(2 * bound + 1)) - bound;
  }
  return m;
}

void CheckProducts(base::Verifier* verifier) {
  base::XorShift32 rng(99);
  const Matrix<int64_t> a = RandomMatrix(&rng, 16, 100);
  const Matrix<int64_t> b = RandomMatrix(&rng, 16, 100);
  const Matrix<int64_t> c = a.Multiply(b);
  uint64_t fingerprint = 0;
  for (size_t i = 0; i < c.rows(); ++i) {
    for (size_t j = 0; j < c.cols(); ++j)
      fingerprint =
          base::HashCombine(fingerprint, static_cast<uint64_t>(c(i, j)));
  }
  verifier->ExpectEq(fingerprint, 0x7CB68AD77313155Cull, "A*B fingerprint");
  verifier->ExpectEqSigned(c.Trace(), -32287, "trace(A*B)");
  verifier->ExpectTrue(
      c.Transpose() == b.Transpose().Multiply(a.Transpose()),
      "(AB)^T == B^T A^T");
  verifier->ExpectTrue(a.Multiply(Matrix<int64_t>::Identity(16)) == a,
                       "A*I == A");
}

void CheckDeterminant(base::Verifier* verifier) {
  base::XorShift32 rng(5);
  const Matrix<int64_t> m = RandomMatrix(&rng, 6, 9);
  verifier->ExpectEqSigned(matrix_tool::DeterminantBareiss(m), 1336246,
                           "det (Bareiss)");
  verifier->ExpectEqSigned(matrix_tool::DeterminantLaplace(m), 1336246,
                           "det (Laplace)");
}

void CheckFibonacci(base::Verifier* verifier) {
  // [[1,1],[1,0]]^90 holds F(91), F(90), F(89).
  Matrix<uint64_t> step(2, 2);
  step(0, 0) = step(0, 1) = step(1, 0) = 1;
  Matrix<uint64_t> power = Matrix<uint64_t>::Identity(2);
  for (uint64_t exponent = 90; exponent != 0; exponent >>= 1) {
    if (exponent & 1)
      power = power.Multiply(step);
    step = step.Multiply(step);
  }
  uint64_t previous = 0, current = 1;
  for (int i = 1; i < 90; ++i) {
    const uint64_t next = previous + current;
    previous = current;
    current = next;
  }
  verifier->ExpectEq(power(0, 1), 2880067194370816120ull, "F(90) by matrix");
  verifier->ExpectEq(current, 2880067194370816120ull, "F(90) by iteration");
}

void CheckLinearSolve(base::Verifier* verifier) {
  // Diagonally dominant system with solution x = (1, 2, ..., 8).
  const size_t n = 8;
  Matrix<double> a(n, n);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j)
      a(i, j) = i == j ? 20.0 + i : 1.0 / (1.0 + i + j);
  }
  std::vector<double> b(n, 0.0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j)
      b[i] += a(i, j) * static_cast<double>(j + 1);
  }
  std::vector<double> x;
  verifier->ExpectTrue(matrix_tool::SolveLinearSystem(a, b, &x), "solve");
  double max_error = 0.0;
  for (size_t i = 0; i < x.size(); ++i)
    max_error =
        std::fmax(max_error, std::fabs(x[i] - static_cast<double>(i + 1)));
  verifier->ExpectTrue(x.size() == n && max_error < 1e-12, "solution error");
}

}  // namespace

int main() {
  base::Verifier verifier(MATRIX_TOOL_NAME);
  CheckProducts(&verifier);
  CheckDeterminant(&verifier);
  CheckFibonacci(&verifier);
  CheckLinearSolve(&verifier);
  return verifier.Finish();
}
