/* C callers of the assembly base_mix64(), and the C reference. */

#include "base/cpu/mix64.h"

static const uint64_t kGoldenGamma = 0x9E3779B97F4A7C15ull;

uint64_t base_mix64_reference(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t base_splitmix64_at(uint64_t seed, uint64_t index) {
  return base_mix64(seed + (index + 1) * kGoldenGamma);
}

uint64_t base_splitmix64_xor(uint64_t seed, size_t count) {
  uint64_t state = seed;
  uint64_t result = 0;
  for (size_t i = 0; i < count; ++i) {
    state += kGoldenGamma;
    result ^= base_mix64(state);
  }
  return result;
}

uint64_t base_splitmix64_xor_reference(uint64_t seed, size_t count) {
  uint64_t state = seed;
  uint64_t result = 0;
  for (size_t i = 0; i < count; ++i) {
    state += kGoldenGamma;
    result ^= base_mix64_reference(state);
  }
  return result;
}
