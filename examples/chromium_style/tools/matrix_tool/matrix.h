// A dense row-major matrix template. The members are defined in this header;
// matrix_instantiations.cc instantiates them for int64_t, uint64_t and
// double, and the extern declarations below keep other files from
// instantiating them again.

#ifndef TOOLS_MATRIX_TOOL_MATRIX_H_
#define TOOLS_MATRIX_TOOL_MATRIX_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace matrix_tool {

template <typename T>
class Matrix {
 public:
  Matrix(size_t rows, size_t cols)
      : rows_(rows), cols_(cols), data_(rows * cols) {}

  static Matrix Identity(size_t n);

  size_t rows() const { return rows_; }
  size_t cols() const { return cols_; }

  T& operator()(size_t row, size_t col) { return data_[row * cols_ + col]; }
  const T& operator()(size_t row, size_t col) const {
    return data_[row * cols_ + col];
  }

  Matrix Multiply(const Matrix& other) const;
  Matrix Transpose() const;
  T Trace() const;

  bool operator==(const Matrix& other) const {
    return rows_ == other.rows_ && cols_ == other.cols_ && data_ == other.data_;
  }

 private:
  size_t rows_;
  size_t cols_;
  std::vector<T> data_;
};

template <typename T>
Matrix<T> Matrix<T>::Identity(size_t n) {
  Matrix result(n, n);
  for (size_t i = 0; i < n; ++i)
    result(i, i) = T(1);
  return result;
}

template <typename T>
Matrix<T> Matrix<T>::Multiply(const Matrix& other) const {
  Matrix result(rows_, other.cols_);
  for (size_t i = 0; i < rows_; ++i) {
    for (size_t k = 0; k < cols_; ++k) {
      const T a = (*this)(i, k);
      for (size_t j = 0; j < other.cols_; ++j)
        result(i, j) += a * other(k, j);
    }
  }
  return result;
}

template <typename T>
Matrix<T> Matrix<T>::Transpose() const {
  Matrix result(cols_, rows_);
  for (size_t i = 0; i < rows_; ++i) {
    for (size_t j = 0; j < cols_; ++j)
      result(j, i) = (*this)(i, j);
  }
  return result;
}

template <typename T>
T Matrix<T>::Trace() const {
  T sum = T(0);
  for (size_t i = 0; i < rows_ && i < cols_; ++i)
    sum += (*this)(i, i);
  return sum;
}

extern template class Matrix<int64_t>;
extern template class Matrix<uint64_t>;
extern template class Matrix<double>;

}  // namespace matrix_tool

#endif  // TOOLS_MATRIX_TOOL_MATRIX_H_
