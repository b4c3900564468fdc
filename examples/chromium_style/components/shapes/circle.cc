// Circle: params = {radius}.

#include <memory>
#include <vector>

#include "components/shapes/geometry_constants.h"
#include "components/shapes/shape.h"
#include "components/shapes/shape_registry.h"

namespace shapes {
namespace {

class Circle : public Shape {
 public:
  explicit Circle(double radius) : radius_(radius) {}

  const char* kind() const override { return "circle"; }
  double Area() const override { return kPi * radius_ * radius_; }
  double Perimeter() const override { return 2.0 * kPi * radius_; }

 private:
  double radius_;
};

std::unique_ptr<Shape> CreateCircle(const std::vector<double>& params) {
  if (params.size() != 1 || !(params[0] > 0))
    return nullptr;
  return std::make_unique<Circle>(params[0]);
}

const ShapeRegistrar g_circle_registrar("circle", &CreateCircle);

}  // namespace
}  // namespace shapes
