/* The SplitMix64 finaliser, in x86-64 assembly with a C reference.
 *
 * base_mix64() lives in mix64_x86_64.S (the example's only native assembly
 * object); everything else here is C in mix64_checksum.c. */

#ifndef BASE_CPU_MIX64_H_
#define BASE_CPU_MIX64_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* z ^= z >> 30; z *= 0xBF58476D1CE4E5B9; z ^= z >> 27;
 * z *= 0x94D049BB133111EB; z ^= z >> 31. */
uint64_t base_mix64(uint64_t z);

/* The same function in C. */
uint64_t base_mix64_reference(uint64_t z);

/* Output number |index| (0-based) of the SplitMix64 generator seeded with
 * |seed|, computed with base_mix64(): base_mix64(seed + (index + 1) * gamma).
 * With seed 0 the first output (index 0) is 0xE220A8397B1DCDAF. */
uint64_t base_splitmix64_at(uint64_t seed, uint64_t index);

/* XOR of the first |count| SplitMix64 outputs for |seed|, calling the
 * assembly function in a loop; and the same with the C reference. */
uint64_t base_splitmix64_xor(uint64_t seed, size_t count);
uint64_t base_splitmix64_xor_reference(uint64_t seed, size_t count);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* BASE_CPU_MIX64_H_ */
