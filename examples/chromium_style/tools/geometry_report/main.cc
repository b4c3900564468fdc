// geometry_report: formats a table of shapes (virtual dispatch into
// //components/shapes, sorting, string formatting) and compares it with the
// expected text, generated independently in Python.

#include <string>

#include "base/strings/string_util.h"
#include "base/verify.h"
#include "components/shapes/shape_registry.h"
#include "tools/geometry_report/report.h"
#include "tools/geometry_report/sample_report.h"

int main() {
  base::Verifier verifier("geometry_report");

  // Filled by static initialisers in four objects of //components/shapes.
  verifier.ExpectStrEq(
      base::JoinStrings(shapes::RegisteredShapeKinds(), ","),
      "circle,polygon,rectangle,triangle", "registered shape kinds");

  std::string report;
  verifier.ExpectTrue(
      geometry_report::BuildReport(geometry_report::kSampleSpec, &report),
      "report built");
  verifier.ExpectStrEq(report, geometry_report::kSampleReport,
                       "report text");

  std::string error;
  verifier.ExpectTrue(
      !geometry_report::BuildReport("circle 1\nhexagon 2\n", &error),
      "unknown kind rejected");
  verifier.ExpectStrEq(error, "bad shape line: hexagon 2", "error text");

  return verifier.Finish();
}
