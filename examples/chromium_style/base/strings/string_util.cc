// ASCII string helpers.

#include "base/strings/string_util.h"

namespace base {

std::string ToUpperASCII(std::string_view text) {
  std::string result(text);
  for (char& c : result) {
    if (c >= 'a' && c <= 'z')
      c = static_cast<char>(c - 'a' + 'A');
  }
  return result;
}

std::string_view TrimWhitespaceASCII(std::string_view text) {
  size_t begin = 0;
  size_t end = text.size();
  while (begin < end && IsAsciiWhitespace(text[begin]))
    ++begin;
  while (end > begin && IsAsciiWhitespace(text[end - 1]))
    --end;
  return text.substr(begin, end - begin);
}

std::vector<std::string_view> SplitStringPiece(std::string_view text,
                                               char separator) {
  std::vector<std::string_view> pieces;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(separator, start);
    if (end == std::string_view::npos) {
      pieces.push_back(text.substr(start));
      return pieces;
    }
    pieces.push_back(text.substr(start, end - start));
    start = end + 1;
  }
}

std::string JoinStrings(const std::vector<std::string>& parts,
                        std::string_view separator) {
  std::string result;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i != 0)
      result.append(separator);
    result.append(parts[i]);
  }
  return result;
}

std::string ReplaceAll(std::string_view text,
                       std::string_view from,
                       std::string_view to) {
  if (from.empty())
    return std::string(text);
  std::string result;
  size_t start = 0;
  while (true) {
    const size_t hit = text.find(from, start);
    if (hit == std::string_view::npos)
      break;
    result.append(text.substr(start, hit - start));
    result.append(to);
    start = hit + from.size();
  }
  result.append(text.substr(start));
  return result;
}

}  // namespace base
