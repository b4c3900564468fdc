// Bareiss and Laplace determinants.

#include "tools/matrix_tool/determinant.h"

#include <utility>

namespace matrix_tool {

int64_t DeterminantBareiss(const Matrix<int64_t>& input) {
  Matrix<int64_t> m = input;
  const size_t n = m.rows();
  int64_t sign = 1;
  int64_t previous_pivot = 1;
  for (size_t k = 0; k + 1 < n; ++k) {
    if (m(k, k) == 0) {
      size_t swap_row = k + 1;
      while (swap_row < n && m(swap_row, k) == 0)
        ++swap_row;
      if (swap_row == n)
        return 0;
      for (size_t j = 0; j < n; ++j)
        std::swap(m(k, j), m(swap_row, j));
      sign = -sign;
    }
    for (size_t i = k + 1; i < n; ++i) {
      for (size_t j = k + 1; j < n; ++j)
        m(i, j) = (m(i, j) * m(k, k) - m(i, k) * m(k, j)) / previous_pivot;
    }
    previous_pivot = m(k, k);
  }
  return sign * m(n - 1, n - 1);
}

int64_t DeterminantLaplace(const Matrix<int64_t>& m) {
  const size_t n = m.rows();
  if (n == 1)
    return m(0, 0);
  int64_t result = 0;
  for (size_t col = 0; col < n; ++col) {
    Matrix<int64_t> minor(n - 1, n - 1);
    for (size_t i = 1; i < n; ++i) {
      size_t out_col = 0;
      for (size_t j = 0; j < n; ++j) {
        if (j != col)
          minor(i - 1, out_col++) = m(i, j);
      }
    }
    const int64_t term = m(0, col) * DeterminantLaplace(minor);
    result += (col % 2 == 0) ? term : -term;
  }
  return result;
}

}  // namespace matrix_tool
