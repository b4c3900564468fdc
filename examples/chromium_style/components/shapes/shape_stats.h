// Aggregate statistics over a collection of shapes.

#ifndef COMPONENTS_SHAPES_SHAPE_STATS_H_
#define COMPONENTS_SHAPES_SHAPE_STATS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "components/shapes/shape.h"

namespace shapes {

struct ShapeStats {
  int count = 0;
  double total_area = 0;
  double total_perimeter = 0;
  // Area in thousandths, clamped to [0, 10^9] and folded with
  // base::HashCombine in collection order.
  uint64_t fingerprint = 0;
};

ShapeStats Summarize(const std::vector<std::unique_ptr<Shape>>& shapes);

}  // namespace shapes

#endif  // COMPONENTS_SHAPES_SHAPE_STATS_H_
