// Header-only sorting templates (two independent algorithms, so callers can
// cross-check them against each other and against std::sort).

#ifndef BASE_ALGORITHM_SORT_H_
#define BASE_ALGORITHM_SORT_H_

#include <cstddef>
#include <iterator>
#include <utility>
#include <vector>

namespace base {

template <typename T, typename Less>
void InsertionSort(std::vector<T>& items, Less less) {
  for (size_t i = 1; i < items.size(); ++i) {
    T value = std::move(items[i]);
    size_t j = i;
    while (j > 0 && less(value, items[j - 1])) {
      items[j] = std::move(items[j - 1]);
      --j;
    }
    items[j] = std::move(value);
  }
}

// Stable top-down merge sort.
template <typename T, typename Less>
void MergeSort(std::vector<T>& items, Less less) {
  if (items.size() < 2)
    return;
  const size_t middle = items.size() / 2;
  std::vector<T> left(std::make_move_iterator(items.begin()),
                      std::make_move_iterator(items.begin() + middle));
  std::vector<T> right(std::make_move_iterator(items.begin() + middle),
                       std::make_move_iterator(items.end()));
  MergeSort(left, less);
  MergeSort(right, less);
  size_t l = 0, r = 0, out = 0;
  while (l < left.size() && r < right.size()) {
    if (less(right[r], left[l]))
      items[out++] = std::move(right[r++]);
    else
      items[out++] = std::move(left[l++]);
  }
  while (l < left.size())
    items[out++] = std::move(left[l++]);
  while (r < right.size())
    items[out++] = std::move(right[r++]);
}

template <typename T>
void MergeSort(std::vector<T>& items) {
  MergeSort(items, [](const T& a, const T& b) { return a < b; });
}

template <typename T, typename Less>
bool IsSorted(const std::vector<T>& items, Less less) {
  for (size_t i = 1; i < items.size(); ++i) {
    if (less(items[i], items[i - 1]))
      return false;
  }
  return true;
}

}  // namespace base

#endif  // BASE_ALGORITHM_SORT_H_
