// The sample every report binary checks: a spec and the report it must give
// (generated independently in Python). geometry_report builds the report
// itself; report_plugin_host has libreport_plugin.so build it.

#ifndef TOOLS_GEOMETRY_REPORT_SAMPLE_REPORT_H_
#define TOOLS_GEOMETRY_REPORT_SAMPLE_REPORT_H_

namespace geometry_report {

constexpr char kSampleSpec[] =
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
constexpr char kSampleReport[] =
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

}  // namespace geometry_report

#endif  // TOOLS_GEOMETRY_REPORT_SAMPLE_REPORT_H_
