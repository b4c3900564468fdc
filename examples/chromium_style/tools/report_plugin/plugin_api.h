// The C interface of libreport_plugin.so: the one symbol it exports.

#ifndef TOOLS_REPORT_PLUGIN_PLUGIN_API_H_
#define TOOLS_REPORT_PLUGIN_PLUGIN_API_H_

#include <cstddef>

extern "C" {

// Formats |spec| (geometry_report's input format) into |buffer| as a
// NUL-terminated report, or the error text when |spec| is invalid. Returns
// 1 on success, 0 on a bad spec, -1 when |size| is too small.
typedef int (*ReportPluginBuildFn)(const char* spec,
                                   char* buffer,
                                   size_t size);

}  // extern "C"

#define REPORT_PLUGIN_BUILD_SYMBOL "report_plugin_build"

#endif  // TOOLS_REPORT_PLUGIN_PLUGIN_API_H_
