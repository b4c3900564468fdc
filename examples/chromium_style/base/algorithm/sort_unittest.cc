// Cross-checks the sorting templates, radix sort and std::sort.

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "base/algorithm/radix_sort.h"
#include "base/algorithm/sort.h"
#include "base/rand/xorshift.h"
#include "base/test/test.h"

namespace {

std::vector<uint32_t> RandomValues(uint32_t seed, size_t count) {
  base::XorShift32 rng(seed);
  std::vector<uint32_t> values(count);
  for (uint32_t& v : values)
    v = rng.Next();
  return values;
}

TEST(SortTest, AllAlgorithmsAgree) {
  const std::vector<uint32_t> input = RandomValues(7, 3000);
  std::vector<uint32_t> expected = input;
  std::sort(expected.begin(), expected.end());

  std::vector<uint32_t> merged = input;
  base::MergeSort(merged);
  std::vector<uint32_t> radix = input;
  base::RadixSortU32(&radix);
  std::vector<uint32_t> insertion(input.begin(), input.begin() + 500);
  base::InsertionSort(insertion, [](uint32_t a, uint32_t b) { return a < b; });

  EXPECT_TRUE(merged == expected);
  EXPECT_TRUE(radix == expected);
  EXPECT_TRUE(base::IsSorted(insertion,
                             [](uint32_t a, uint32_t b) { return a < b; }));
}

TEST(SortTest, MergeSortIsStable) {
  std::vector<std::pair<int, std::string>> items = {
      {2, "a"}, {1, "b"}, {2, "c"}, {1, "d"}, {0, "e"}, {2, "f"}};
  base::MergeSort(items, [](const auto& x, const auto& y) {
    return x.first < y.first;
  });
  std::string order;
  for (const auto& item : items)
    order += item.second;
  EXPECT_EQ(order, "ebdacf");
}

TEST(XorShiftTest, KnownSequence) {
  base::XorShift32 rng(1);
  EXPECT_EQ(rng.Next(), 270369u);
  EXPECT_EQ(rng.Next(), 67634689u);
  EXPECT_EQ(rng.Next(), 2647435461u);
}

}  // namespace
