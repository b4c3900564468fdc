// Geometry report.

#include "tools/geometry_report/report.h"

#include <cstdlib>
#include <memory>
#include <vector>

#include "base/algorithm/sort.h"
#include "base/json/json_escape.h"
#include "base/strings/string_util.h"
#include "base/strings/stringprintf.h"
#include "components/shapes/shape_registry.h"
#include "components/shapes/shape_stats.h"
#include "tools/geometry_report/table_formatter.h"

namespace geometry_report {
namespace {

bool ParseNumber(std::string_view text, double* value) {
  const std::string copy(text);
  char* end = nullptr;
  *value = std::strtod(copy.c_str(), &end);
  return !copy.empty() && end == copy.c_str() + copy.size();
}

std::unique_ptr<shapes::Shape> ParseLine(std::string_view line) {
  std::vector<std::string_view> words;
  for (std::string_view word : base::SplitStringPiece(line, ' ')) {
    if (!word.empty())
      words.push_back(word);
  }
  if (words.empty())
    return nullptr;
  std::vector<double> params;
  for (size_t i = 1; i < words.size(); ++i) {
    double value = 0;
    if (!ParseNumber(words[i], &value))
      return nullptr;
    params.push_back(value);
  }
  return shapes::CreateShape(words[0], params);
}

}  // namespace

bool BuildReport(std::string_view spec, std::string* report) {
  std::vector<std::unique_ptr<shapes::Shape>> list;
  for (std::string_view line : base::SplitStringPiece(spec, '\n')) {
    line = base::TrimWhitespaceASCII(line);
    if (line.empty())
      continue;
    std::unique_ptr<shapes::Shape> shape = ParseLine(line);
    if (!shape) {
      *report = "bad shape line: " + std::string(line);
      return false;
    }
    list.push_back(std::move(shape));
  }

  base::MergeSort(list, [](const std::unique_ptr<shapes::Shape>& a,
                           const std::unique_ptr<shapes::Shape>& b) {
    return a->Area() > b->Area();
  });

  TableFormatter table(
      {Align::kRight, Align::kLeft, Align::kRight, Align::kRight});
  table.AddRow({"#", "kind", "area", "perimeter"});
  for (size_t i = 0; i < list.size(); ++i) {
    table.AddRow({base::StringPrintf("%zu", i + 1), list[i]->kind(),
                  base::StringPrintf("%.3f", list[i]->Area()),
                  base::StringPrintf("%.3f", list[i]->Perimeter())});
  }
  const shapes::ShapeStats stats = shapes::Summarize(list);
  *report = table.Render();
  *report += base::StringPrintf("total: %d shapes, area %.3f, perimeter %.3f\n",
                                stats.count, stats.total_area,
                                stats.total_perimeter);
  if (!list.empty())
    *report += "largest: " + base::EscapeJSONString(list[0]->Describe()) + "\n";
  return true;
}

}  // namespace geometry_report
