/* FNV-1a, 32 and 64 bit. */

#include "base/hash/fnv1a.h"

uint32_t base_fnv1a32(const void* data, size_t size) {
  const uint8_t* bytes = (const uint8_t*)data;
  uint32_t hash = 2166136261u;
  for (size_t i = 0; i < size; ++i) {
    hash ^= bytes[i];
    hash *= 16777619u;
  }
  return hash;
}

uint64_t base_fnv1a64(const void* data, size_t size) {
  const uint8_t* bytes = (const uint8_t*)data;
  uint64_t hash = 14695981039346656037ull;
  for (size_t i = 0; i < size; ++i) {
    hash ^= bytes[i];
    hash *= 1099511628211ull;
  }
  return hash;
}
