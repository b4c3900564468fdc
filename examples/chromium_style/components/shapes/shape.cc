// Shape's out-of-line members (its key function anchors the vtable here).

#include "components/shapes/shape.h"

#include "base/strings/stringprintf.h"

namespace shapes {

Shape::~Shape() = default;

std::string Shape::Describe() const {
  return base::StringPrintf("%s area=%.3f perimeter=%.3f", kind(), Area(),
                            Perimeter());
}

}  // namespace shapes
