// Shape kind registry.

#include "components/shapes/shape_registry.h"

#include <algorithm>

#include "base/check.h"

namespace shapes {
namespace {

struct Entry {
  const char* kind;
  ShapeFactory factory;
};

constexpr int kMaxKinds = 16;

// Constant-initialised, so registrars may run in any order.
Entry g_entries[kMaxKinds];
int g_entry_count = 0;

}  // namespace

ShapeRegistrar::ShapeRegistrar(const char* kind, ShapeFactory factory) {
  CHECK(g_entry_count < kMaxKinds);
  g_entries[g_entry_count++] = Entry{kind, factory};
}

std::unique_ptr<Shape> CreateShape(std::string_view kind,
                                   const std::vector<double>& params) {
  for (int i = 0; i < g_entry_count; ++i) {
    if (kind == g_entries[i].kind)
      return g_entries[i].factory(params);
  }
  return nullptr;
}

std::vector<std::string> RegisteredShapeKinds() {
  std::vector<std::string> kinds;
  for (int i = 0; i < g_entry_count; ++i)
    kinds.emplace_back(g_entries[i].kind);
  std::sort(kinds.begin(), kinds.end());
  return kinds;
}

}  // namespace shapes
