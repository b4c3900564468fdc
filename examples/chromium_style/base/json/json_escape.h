// JSON string escaping.

#ifndef BASE_JSON_JSON_ESCAPE_H_
#define BASE_JSON_JSON_ESCAPE_H_

#include <string>
#include <string_view>

namespace base {

// Returns |text| as a quoted JSON string literal; control characters become
// \uXXXX (or the short escapes \b \f \n \r \t).
std::string EscapeJSONString(std::string_view text);

}  // namespace base

#endif  // BASE_JSON_JSON_ESCAPE_H_
