// Aggregate statistics over shapes.

#include "components/shapes/shape_stats.h"

#include <cmath>

#include "base/hash/hash_combine.h"
#include "base/numerics/clamp.h"

namespace shapes {

ShapeStats Summarize(const std::vector<std::unique_ptr<Shape>>& shapes) {
  ShapeStats stats;
  for (const auto& shape : shapes) {
    const double area = shape->Area();
    ++stats.count;
    stats.total_area += area;
    stats.total_perimeter += shape->Perimeter();
    const int64_t milli_area =
        base::Clamp64(std::llround(area * 1000.0), 0, 1000000000);
    stats.fingerprint =
        base::HashCombine(stats.fingerprint, static_cast<uint64_t>(milli_area));
  }
  return stats;
}

}  // namespace shapes
