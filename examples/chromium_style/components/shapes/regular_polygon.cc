// Regular polygon: params = {side count, side length}.

#include <cmath>
#include <memory>
#include <vector>

#include "components/shapes/geometry_constants.h"
#include "components/shapes/shape.h"
#include "components/shapes/shape_registry.h"

namespace shapes {
namespace {

class RegularPolygon : public Shape {
 public:
  RegularPolygon(int sides, double side_length)
      : sides_(sides), side_length_(side_length) {}

  const char* kind() const override { return "polygon"; }
  double Area() const override {
    return sides_ * side_length_ * side_length_ /
           (4.0 * std::tan(kPi / sides_));
  }
  double Perimeter() const override { return sides_ * side_length_; }

 private:
  int sides_;
  double side_length_;
};

std::unique_ptr<Shape> CreateRegularPolygon(const std::vector<double>& params) {
  if (params.size() != 2 || !(params[0] >= 3 && params[0] <= 1000) ||
      params[0] != std::floor(params[0]) || !(params[1] > 0)) {
    return nullptr;
  }
  return std::make_unique<RegularPolygon>(static_cast<int>(params[0]),
                                          params[1]);
}

const ShapeRegistrar g_polygon_registrar("polygon", &CreateRegularPolygon);

}  // namespace
}  // namespace shapes
