// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320), as used by zlib.
//
// Crc32Step() advances the raw register by one byte and is defined out of
// line, so that callers' hot loops are a ThinLTO import target. The lookup
// table is filled by a static initialiser in crc32.cc: if that constructor
// does not run, every checksum is wrong.

#ifndef BASE_HASH_CRC32_H_
#define BASE_HASH_CRC32_H_

#include <cstddef>
#include <cstdint>

namespace base {

constexpr uint32_t kCrc32InitialState = 0xFFFFFFFFu;

uint32_t Crc32Step(uint32_t state, uint8_t byte);

inline uint32_t Crc32Finish(uint32_t state) {
  return ~state;
}

// CRC-32 of a whole buffer; Crc32("123456789", 9) == 0xCBF43926.
uint32_t Crc32(const void* data, size_t size);

// Bitwise reference implementation (no table), for cross-checking.
uint32_t Crc32Bitwise(const void* data, size_t size);

}  // namespace base

#endif  // BASE_HASH_CRC32_H_
