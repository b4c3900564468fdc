// geometry_report: formats a table of shapes (virtual dispatch into
// //components/shapes, sorting, string formatting) and compares it with the
// expected text, generated independently in Python.

#include <string>

#include "base/strings/string_util.h"
#include "base/verify.h"
#include "components/shapes/shape_registry.h"
#include "tools/geometry_report/report.h"

namespace {

constexpr char kSpec[] =
    "circle 1.5\n"
    "rectangle 3 4\n"
    "triangle 3 4 5\n"
    "polygon 6 2\n"
    "circle 0.5\n"
    "rectangle 10 0.25\n"
    "polygon 5 1\n"
    "triangle 7 8 9\n"
    "rectangle 2 3\n";

// Rows 5 and 6 tie on area 6; the sort must keep their input order.
constexpr char kExpectedReport[] =
    "#  kind         area  perimeter\n"
    "-------------------------------\n"
    "1  triangle   26.833     24.000\n"
    "2  rectangle  12.000     14.000\n"
    "3  polygon    10.392     12.000\n"
    "4  circle      7.069      9.425\n"
    "5  triangle    6.000     12.000\n"
    "6  rectangle   6.000     10.000\n"
    "7  rectangle   2.500     20.500\n"
    "8  polygon     1.720      5.000\n"
    "9  circle      0.785      3.142\n"
    "total: 9 shapes, area 73.300, perimeter 110.066\n"
    "largest: \"triangle area=26.833 perimeter=24.000\"\n";

}  // namespace

int main() {
  base::Verifier verifier("geometry_report");

  // Filled by static initialisers in four objects of //components/shapes.
  verifier.ExpectStrEq(
      base::JoinStrings(shapes::RegisteredShapeKinds(), ","),
      "circle,polygon,rectangle,triangle", "registered shape kinds");

  std::string report;
  verifier.ExpectTrue(geometry_report::BuildReport(kSpec, &report),
                      "report built");
  verifier.ExpectStrEq(report, kExpectedReport, "report text");

  std::string error;
  verifier.ExpectTrue(
      !geometry_report::BuildReport("circle 1\nhexagon 2\n", &error),
      "unknown kind rejected");
  verifier.ExpectStrEq(error, "bad shape line: hexagon 2", "error text");

  return verifier.Finish();
}
