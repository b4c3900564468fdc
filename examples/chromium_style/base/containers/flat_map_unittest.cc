// Tests for base::FlatMap.

#include <string>

#include "base/containers/flat_map.h"
#include "base/test/test.h"

namespace {

TEST(FlatMapTest, SetFindErase) {
  base::FlatMap<std::string, int> map;
  EXPECT_TRUE(map.Set("pear", 3));
  EXPECT_TRUE(map.Set("apple", 1));
  EXPECT_TRUE(map.Set("fig", 2));
  EXPECT_FALSE(map.Set("apple", 10));
  EXPECT_EQ(map.size(), 3u);
  EXPECT_EQ(map.entries()[0].first, "apple");
  EXPECT_EQ(*map.Find("apple"), 10);
  EXPECT_TRUE(map.Find("kiwi") == nullptr);
  EXPECT_TRUE(map.Erase("fig"));
  EXPECT_FALSE(map.Erase("fig"));
  EXPECT_EQ(map.entries()[1].first, "pear");
}

TEST(FlatMapTest, ManyIntegerKeys) {
  base::FlatMap<int, int> map;
  for (int i = 0; i < 500; ++i)
    map.Set((i * 37) % 500, i);
  bool ordered = true;
  for (size_t i = 0; i < map.size(); ++i)
    ordered = ordered && map.entries()[i].first == static_cast<int>(i);
  EXPECT_TRUE(ordered);
  EXPECT_EQ(*map.Find(37), 1);
}

}  // namespace
