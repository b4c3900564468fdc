// Plain-text tables with padded columns.

#ifndef TOOLS_GEOMETRY_REPORT_TABLE_FORMATTER_H_
#define TOOLS_GEOMETRY_REPORT_TABLE_FORMATTER_H_

#include <string>
#include <vector>

namespace geometry_report {

enum class Align { kLeft, kRight };

class TableFormatter {
 public:
  explicit TableFormatter(std::vector<Align> columns);

  // |cells| must have one entry per column.
  void AddRow(std::vector<std::string> cells);

  // Rows separated by '\n', cells by two spaces; a dashed rule after the
  // first row. Every line ends with '\n'; no trailing spaces.
  std::string Render() const;

 private:
  std::vector<Align> columns_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace geometry_report

#endif  // TOOLS_GEOMETRY_REPORT_TABLE_FORMATTER_H_
