// Plain-text tables.

#include "tools/geometry_report/table_formatter.h"

#include "base/check.h"

namespace geometry_report {

TableFormatter::TableFormatter(std::vector<Align> columns)
    : columns_(std::move(columns)) {}

void TableFormatter::AddRow(std::vector<std::string> cells) {
  CHECK(cells.size() == columns_.size());
  rows_.push_back(std::move(cells));
}

std::string TableFormatter::Render() const {
  std::vector<size_t> widths(columns_.size(), 0);
  for (const auto& row : rows_) {
    for (size_t c = 0; c < row.size(); ++c)
      widths[c] = row[c].size() > widths[c] ? row[c].size() : widths[c];
  }
  std::string out;
  for (size_t r = 0; r < rows_.size(); ++r) {
    std::string line;
    for (size_t c = 0; c < columns_.size(); ++c) {
      if (c != 0)
        line += "  ";
      const std::string& cell = rows_[r][c];
      const std::string padding(widths[c] - cell.size(), ' ');
      line += columns_[c] == Align::kRight ? padding + cell : cell + padding;
    }
    while (!line.empty() && line.back() == ' ')
      line.pop_back();
    out += line + "\n";
    if (r == 0) {
      size_t total = 0;
      for (size_t width : widths)
        total += width;
      out += std::string(total + 2 * (widths.size() - 1), '-') + "\n";
    }
  }
  return out;
}

}  // namespace geometry_report
