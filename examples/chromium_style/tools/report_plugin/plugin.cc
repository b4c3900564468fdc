// libreport_plugin.so: geometry_report's report behind a C entry point.

#include <cstring>
#include <string>

#include "tools/geometry_report/report.h"
#include "tools/report_plugin/plugin_api.h"

extern "C" __attribute__((visibility("default"))) int report_plugin_build(
    const char* spec,
    char* buffer,
    size_t size) {
  std::string text;
  const bool ok = geometry_report::BuildReport(spec, &text);
  if (text.size() + 1 > size)
    return -1;
  std::memcpy(buffer, text.c_str(), text.size() + 1);
  return ok ? 1 : 0;
}
