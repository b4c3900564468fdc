// LEB128 unsigned varints.

#include "components/codec/codec.h"

namespace codec {

void AppendVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

bool ReadVarint(std::string_view* input, uint64_t* value) {
  uint64_t result = 0;
  for (size_t i = 0; i < input->size() && i < 10; ++i) {
    const uint8_t byte = static_cast<uint8_t>((*input)[i]);
    if (i == 9 && byte > 1)
      return false;  // Would overflow 64 bits.
    result |= static_cast<uint64_t>(byte & 0x7F) << (7 * i);
    if ((byte & 0x80) == 0) {
      input->remove_prefix(i + 1);
      *value = result;
      return true;
    }
  }
  return false;
}

}  // namespace codec
