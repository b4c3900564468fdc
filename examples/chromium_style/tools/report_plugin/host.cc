// report_plugin_host: loads libreport_plugin.so from its own directory with
// dlopen, as Chromium loads plugins, and checks the report the plugin builds
// against the expected text (the same as geometry_report's, from Python).

#include <dlfcn.h>
#include <unistd.h>

#include <string>

#include "base/verify.h"
#include "tools/report_plugin/plugin_api.h"

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
  verifier.ExpectEqSigned(CallBuild(build, kSpec, buffer, sizeof(buffer)), 1,
                          "report built by the plugin");
  verifier.ExpectStrEq(buffer, kExpectedReport, "report text");
  verifier.ExpectEqSigned(CallBuild(build, "circle 1\nhexagon 2\n", buffer,
                                    sizeof(buffer)),
                          0, "unknown kind rejected");
  verifier.ExpectStrEq(buffer, "bad shape line: hexagon 2", "error text");
  verifier.ExpectEqSigned(CallBuild(build, kSpec, buffer, 8), -1, "short buffer refused");

  dlclose(handle);
  return verifier.Finish();
}
