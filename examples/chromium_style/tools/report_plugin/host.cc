// report_plugin_host: loads libreport_plugin.so from its own directory with
// dlopen, as Chromium loads plugins, and checks the report the plugin builds
// against geometry_report's sample (tools/geometry_report/sample_report.h).

#include <dlfcn.h>
#include <unistd.h>

#include <string>

#include "base/verify.h"
#include "tools/geometry_report/sample_report.h"
#include "tools/report_plugin/plugin_api.h"

namespace {

// The directory of this executable, with a trailing slash.
std::string OwnDirectory() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0)
    return "./";
  const std::string exe(path, static_cast<size_t>(n));
  return exe.substr(0, exe.rfind('/') + 1);
}

// A pointer from dlsym has no CFI type information in this binary: calls
// through it opt out of -fsanitize=cfi-icall, as Chromium's do.
__attribute__((no_sanitize("cfi-icall"))) int CallBuild(
    ReportPluginBuildFn build,
    const char* spec,
    char* buffer,
    size_t size) {
  return build(spec, buffer, size);
}

}  // namespace

int main() {
  base::Verifier verifier("report_plugin_host");

  const std::string plugin = OwnDirectory() + "libreport_plugin.so";
  void* handle = dlopen(plugin.c_str(), RTLD_NOW | RTLD_LOCAL);
  verifier.ExpectTrue(handle != nullptr, "libreport_plugin.so loaded");
  if (handle == nullptr)
    return verifier.Finish();
  auto build = reinterpret_cast<ReportPluginBuildFn>(
      dlsym(handle, REPORT_PLUGIN_BUILD_SYMBOL));
  verifier.ExpectTrue(build != nullptr, "report_plugin_build exported");
  if (build == nullptr)
    return verifier.Finish();

  char buffer[4096];
  verifier.ExpectEqSigned(CallBuild(build, geometry_report::kSampleSpec,
                                    buffer, sizeof(buffer)),
                          1, "report built by the plugin");
  verifier.ExpectStrEq(buffer, geometry_report::kSampleReport,
                       "report text");
  verifier.ExpectEqSigned(CallBuild(build, "circle 1\nhexagon 2\n", buffer,
                                    sizeof(buffer)),
                          0, "unknown kind rejected");
  verifier.ExpectStrEq(buffer, "bad shape line: hexagon 2", "error text");
  verifier.ExpectEqSigned(
      CallBuild(build, geometry_report::kSampleSpec, buffer, 8), -1,
      "short buffer refused");

  dlclose(handle);
  return verifier.Finish();
}
