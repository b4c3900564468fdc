// Explicit instantiations of Matrix<T> (see matrix.h).

#include "tools/matrix_tool/matrix.h"

namespace matrix_tool {

template class Matrix<int64_t>;
template class Matrix<uint64_t>;
template class Matrix<double>;

}  // namespace matrix_tool
