// Tests for base/math/ and base/bits.h.

#include <cstdint>
#include <vector>

#include "base/bits.h"
#include "base/math/gcd.h"
#include "base/math/isqrt.h"
#include "base/math/primes.h"
#include "base/test/test.h"

namespace {

TEST(GcdTest, KnownAnswers) {
  EXPECT_EQ(base::Gcd(1071, 462), int64_t{21});
  EXPECT_EQ(base::Gcd(-48, 18), int64_t{6});
  EXPECT_EQ(base::Gcd(0, 0), int64_t{0});
  EXPECT_EQ(base::Lcm(4, 6), int64_t{12});
}

TEST(PrimesTest, SieveMatchesTrialDivision) {
  const std::vector<uint32_t> primes = base::PrimesUpTo(100000);
  EXPECT_EQ(primes.size(), 9592u);  // pi(10^5)
  uint64_t sum_below_1000 = 0;
  for (uint32_t p : primes) {
    if (p < 1000)
      sum_below_1000 += p;
  }
  EXPECT_EQ(sum_below_1000, 76127u);
  size_t trial_count = 0;
  for (uint32_t n = 0; n <= 20000; ++n)
    trial_count += base::IsPrimeByTrialDivision(n) ? 1 : 0;
  EXPECT_EQ(trial_count, 2262u);  // pi(20000)
}

TEST(ISqrtTest, KnownAnswers) {
  EXPECT_EQ(base::ISqrt(0), 0u);
  EXPECT_EQ(base::ISqrt(99), 9u);
  EXPECT_EQ(base::ISqrt(1000000000000000000ull), 1000000000u);
  EXPECT_EQ(base::ISqrt(UINT64_MAX), 4294967295u);
}

TEST(BitsTest, PopCountAndReverse) {
  EXPECT_EQ(base::bits::PopCount64(0), 0);
  EXPECT_EQ(base::bits::PopCount64(UINT64_MAX), 64);
  uint64_t x = 0x0123456789ABCDEFull;
  bool agree = true;
  for (int i = 0; i < 1000; ++i) {
    agree = agree && base::bits::PopCount64(x) == __builtin_popcountll(x);
    x = x * 6364136223846793005ull + 1442695040888963407ull;
  }
  EXPECT_TRUE(agree);
  EXPECT_EQ(base::bits::ReverseBits32(1u), 0x80000000u);
  EXPECT_EQ(base::bits::ReverseBits32(0x12345678u), 0x1E6A2C48u);
  EXPECT_TRUE(base::bits::IsPowerOfTwo(4096));
  EXPECT_EQ(base::bits::AlignUp(13, 8), 16u);
}

}  // namespace
