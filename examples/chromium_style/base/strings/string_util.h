// ASCII string helpers.

#ifndef BASE_STRINGS_STRING_UTIL_H_
#define BASE_STRINGS_STRING_UTIL_H_

#include <string>
#include <string_view>
#include <vector>

namespace base {

// Header-inline helpers.
inline bool IsAsciiWhitespace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
         c == '\v';
}

inline bool IsAsciiDigit(char c) {
  return c >= '0' && c <= '9';
}

inline bool IsAsciiAlpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

inline bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

std::string ToUpperASCII(std::string_view text);
std::string_view TrimWhitespaceASCII(std::string_view text);

// Splits on |separator|; empty pieces are kept.
std::vector<std::string_view> SplitStringPiece(std::string_view text,
                                               char separator);
std::string JoinStrings(const std::vector<std::string>& parts,
                        std::string_view separator);
std::string ReplaceAll(std::string_view text,
                       std::string_view from,
                       std::string_view to);

}  // namespace base

#endif  // BASE_STRINGS_STRING_UTIL_H_
