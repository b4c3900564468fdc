// Integer <-> string conversions.

#include "base/strings/string_number_conversions.h"

#include <limits>

#include "base/strings/string_util.h"

namespace base {

std::string NumberToString(int64_t value) {
  // Work on the unsigned magnitude so that INT64_MIN is handled.
  uint64_t magnitude = value < 0 ? 0 - static_cast<uint64_t>(value)
                                 : static_cast<uint64_t>(value);
  char buffer[24];
  size_t pos = sizeof(buffer);
  do {
    buffer[--pos] = static_cast<char>('0' + magnitude % 10);
    magnitude /= 10;
  } while (magnitude != 0);
  if (value < 0)
    buffer[--pos] = '-';
  return std::string(buffer + pos, sizeof(buffer) - pos);
}

bool StringToInt64(std::string_view text, int64_t* value) {
  bool negative = false;
  if (!text.empty() && text[0] == '-') {
    negative = true;
    text.remove_prefix(1);
  }
  if (text.empty())
    return false;
  const uint64_t limit =
      negative ? uint64_t{1} << 63
               : static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  uint64_t magnitude = 0;
  for (char c : text) {
    if (!IsAsciiDigit(c))
      return false;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (magnitude > (limit - digit) / 10)
      return false;
    magnitude = magnitude * 10 + digit;
  }
  *value = negative ? static_cast<int64_t>(0 - magnitude)
                    : static_cast<int64_t>(magnitude);
  return true;
}

std::string HexEncodeLower(const void* data, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  const uint8_t* bytes = static_cast<const uint8_t*>(data);
  std::string result;
  result.reserve(size * 2);
  for (size_t i = 0; i < size; ++i) {
    result.push_back(kDigits[bytes[i] >> 4]);
    result.push_back(kDigits[bytes[i] & 0xF]);
  }
  return result;
}

}  // namespace base
