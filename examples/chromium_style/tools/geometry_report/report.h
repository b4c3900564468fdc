// Builds the geometry report from a textual shape list.

#ifndef TOOLS_GEOMETRY_REPORT_REPORT_H_
#define TOOLS_GEOMETRY_REPORT_REPORT_H_

#include <string>
#include <string_view>

namespace geometry_report {

// |spec| has one shape per line: "<kind> <param> ...". Shapes are listed by
// decreasing area (stable for ties), followed by totals and the largest
// shape's description as a JSON string. On a bad line returns false and puts
// the problem in |report|.
bool BuildReport(std::string_view spec, std::string* report);

}  // namespace geometry_report

#endif  // TOOLS_GEOMETRY_REPORT_REPORT_H_
