// Registry of shape kinds, filled by static initialisers in each shape's
// translation unit (see SHAPES_REGISTER_KIND in circle.cc etc.).

#ifndef COMPONENTS_SHAPES_SHAPE_REGISTRY_H_
#define COMPONENTS_SHAPES_SHAPE_REGISTRY_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "components/shapes/shape.h"

namespace shapes {

// Returns null when |params| are invalid for the kind.
using ShapeFactory =
    std::unique_ptr<Shape> (*)(const std::vector<double>& params);

class ShapeRegistrar {
 public:
  ShapeRegistrar(const char* kind, ShapeFactory factory);
};

// Null for unknown kinds or invalid parameters.
std::unique_ptr<Shape> CreateShape(std::string_view kind,
                                   const std::vector<double>& params);

// Registered kinds, sorted.
std::vector<std::string> RegisteredShapeKinds();

}  // namespace shapes

#endif  // COMPONENTS_SHAPES_SHAPE_REGISTRY_H_
