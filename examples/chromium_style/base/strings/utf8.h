// UTF-8 encoding and decoding of Unicode scalar values.

#ifndef BASE_STRINGS_UTF8_H_
#define BASE_STRINGS_UTF8_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace base {

// Appends the UTF-8 encoding of |code_point|; returns false for surrogates
// and values above U+10FFFF.
bool AppendUtf8(uint32_t code_point, std::string* out);

// Strict decoder: rejects overlong forms, surrogates and truncation.
bool DecodeUtf8(std::string_view text, std::vector<uint32_t>* code_points);

}  // namespace base

#endif  // BASE_STRINGS_UTF8_H_
