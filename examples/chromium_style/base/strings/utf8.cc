// UTF-8 encoding and decoding.

#include "base/strings/utf8.h"

namespace base {
namespace {

bool IsSurrogate(uint32_t cp) {
  return cp >= 0xD800 && cp <= 0xDFFF;
}

}  // namespace

bool AppendUtf8(uint32_t cp, std::string* out) {
  if (IsSurrogate(cp) || cp > 0x10FFFF)
    return false;
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return true;
}

bool DecodeUtf8(std::string_view text, std::vector<uint32_t>* code_points) {
  size_t i = 0;
  while (i < text.size()) {
    const uint8_t lead = static_cast<uint8_t>(text[i]);
    int length;
    uint32_t cp;
    uint32_t minimum;
    if (lead < 0x80) {
      length = 1;
      cp = lead;
      minimum = 0;
    } else if ((lead & 0xE0) == 0xC0) {
      length = 2;
      cp = lead & 0x1F;
      minimum = 0x80;
    } else if ((lead & 0xF0) == 0xE0) {
      length = 3;
      cp = lead & 0x0F;
      minimum = 0x800;
    } else if ((lead & 0xF8) == 0xF0) {
      length = 4;
      cp = lead & 0x07;
      minimum = 0x10000;
    } else {
      return false;
    }
    if (i + static_cast<size_t>(length) > text.size())
      return false;
    for (int k = 1; k < length; ++k) {
      const uint8_t next = static_cast<uint8_t>(text[i + k]);
      if ((next & 0xC0) != 0x80)
        return false;
      cp = (cp << 6) | (next & 0x3F);
    }
    if (cp < minimum || IsSurrogate(cp) || cp > 0x10FFFF)
      return false;
    code_points->push_back(cp);
    i += static_cast<size_t>(length);
  }
  return true;
}

}  // namespace base
