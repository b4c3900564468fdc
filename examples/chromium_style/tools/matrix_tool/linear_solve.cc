// Gaussian elimination with partial pivoting and back substitution.

#include "tools/matrix_tool/linear_solve.h"

#include <cmath>
#include <utility>

namespace matrix_tool {

bool SolveLinearSystem(Matrix<double> a,
                       std::vector<double> b,
                       std::vector<double>* x) {
  const size_t n = a.rows();
  for (size_t k = 0; k < n; ++k) {
    size_t pivot = k;
    for (size_t i = k + 1; i < n; ++i) {
      if (std::fabs(a(i, k)) > std::fabs(a(pivot, k)))
        pivot = i;
    }
    if (std::fabs(a(pivot, k)) < 1e-12)
      return false;
    if (pivot != k) {
      for (size_t j = 0; j < n; ++j)
        std::swap(a(k, j), a(pivot, j));
      std::swap(b[k], b[pivot]);
    }
    for (size_t i = k + 1; i < n; ++i) {
      const double factor = a(i, k) / a(k, k);
      for (size_t j = k; j < n; ++j)
        a(i, j) -= factor * a(k, j);
      b[i] -= factor * b[k];
    }
  }
  x->assign(n, 0.0);
  for (size_t i = n; i-- > 0;) {
    double sum = b[i];
    for (size_t j = i + 1; j < n; ++j)
      sum -= a(i, j) * (*x)[j];
    (*x)[i] = sum / a(i, i);
  }
  return true;
}

}  // namespace matrix_tool
