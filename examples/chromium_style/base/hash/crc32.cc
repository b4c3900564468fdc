// Table-driven CRC-32 with a table built by a static initialiser.

#include "base/hash/crc32.h"

namespace base {
namespace {

constexpr uint32_t kPolynomial = 0xEDB88320u;

uint32_t BitwiseByte(uint32_t state, uint8_t byte) {
  state ^= byte;
  for (int bit = 0; bit < 8; ++bit)
    state = (state >> 1) ^ (kPolynomial & (0u - (state & 1u)));
  return state;
}

// A global object whose constructor fills the table at start-up.
class Crc32Table {
 public:
  Crc32Table() {
    for (uint32_t i = 0; i < 256; ++i)
      entries_[i] = BitwiseByte(0, static_cast<uint8_t>(i));
  }

  uint32_t operator[](uint8_t index) const { return entries_[index]; }

 private:
  uint32_t entries_[256];
};

const Crc32Table g_crc32_table;

}  // namespace

uint32_t Crc32Step(uint32_t state, uint8_t byte) {
  return (state >> 8) ^ g_crc32_table[static_cast<uint8_t>(state ^ byte)];
}

uint32_t Crc32(const void* data, size_t size) {
  const uint8_t* bytes = static_cast<const uint8_t*>(data);
  uint32_t state = kCrc32InitialState;
  for (size_t i = 0; i < size; ++i)
    state = Crc32Step(state, bytes[i]);
  return Crc32Finish(state);
}

uint32_t Crc32Bitwise(const void* data, size_t size) {
  const uint8_t* bytes = static_cast<const uint8_t*>(data);
  uint32_t state = kCrc32InitialState;
  for (size_t i = 0; i < size; ++i)
    state = BitwiseByte(state, bytes[i]);
  return Crc32Finish(state);
}

}  // namespace base
