// Integer <-> string conversions without locale or exceptions.

#ifndef BASE_STRINGS_STRING_NUMBER_CONVERSIONS_H_
#define BASE_STRINGS_STRING_NUMBER_CONVERSIONS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace base {

std::string NumberToString(int64_t value);

// Accepts an optional '-' followed by decimal digits; rejects overflow.
bool StringToInt64(std::string_view text, int64_t* value);

// "0a1b..." (lower case).
std::string HexEncodeLower(const void* data, size_t size);

}  // namespace base

#endif  // BASE_STRINGS_STRING_NUMBER_CONVERSIONS_H_
