// JSON string escaping.

#include "base/json/json_escape.h"

#include "base/strings/stringprintf.h"

namespace base {

std::string EscapeJSONString(std::string_view text) {
  std::string result = "\"";
  for (char c : text) {
    switch (c) {
      case '"': result += "\\\""; break;
      case '\\': result += "\\\\"; break;
      case '\b': result += "\\b"; break;
      case '\f': result += "\\f"; break;
      case '\n': result += "\\n"; break;
      case '\r': result += "\\r"; break;
      case '\t': result += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20)
          result += StringPrintf("\\u%04x", static_cast<unsigned>(c));
        else
          result.push_back(c);
    }
  }
  result.push_back('"');
  return result;
}

}  // namespace base
