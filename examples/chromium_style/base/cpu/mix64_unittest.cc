// Checks the assembly base_mix64() against constants and the C reference.

#include "base/cpu/mix64.h"
#include "base/test/test.h"

namespace {

TEST(Mix64Test, SplitMix64KnownOutputs) {
  // SplitMix64 seeded with 0 (reference: Vigna's splitmix64.c).
  EXPECT_EQ(base_splitmix64_at(0, 0), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(base_splitmix64_at(0, 1), 0x6E789E6AA1B965F4ull);
  EXPECT_EQ(base_splitmix64_at(0, 2), 0x06C45D188009454Full);
}

TEST(Mix64Test, AssemblyMatchesC) {
  EXPECT_EQ(base_splitmix64_xor(0x1234, 1000), 0xE4689A155A42FABFull);
  EXPECT_EQ(base_splitmix64_xor_reference(0x1234, 1000),
            0xE4689A155A42FABFull);
  for (uint64_t z = 1; z < (uint64_t{1} << 60); z = z * 3 + 7)
    EXPECT_EQ(base_mix64(z), base_mix64_reference(z));
}

}  // namespace
