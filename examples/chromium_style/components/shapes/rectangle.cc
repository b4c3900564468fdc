// Rectangle: params = {width, height}.

#include <memory>
#include <vector>

#include "components/shapes/shape.h"
#include "components/shapes/shape_registry.h"

namespace shapes {
namespace {

class Rectangle : public Shape {
 public:
  Rectangle(double width, double height) : width_(width), height_(height) {}

  const char* kind() const override { return "rectangle"; }
  double Area() const override { return width_ * height_; }
  double Perimeter() const override { return 2.0 * (width_ + height_); }

 private:
  double width_;
  double height_;
};

std::unique_ptr<Shape> CreateRectangle(const std::vector<double>& params) {
  if (params.size() != 2 || !(params[0] > 0) || !(params[1] > 0))
    return nullptr;
  return std::make_unique<Rectangle>(params[0], params[1]);
}

const ShapeRegistrar g_rectangle_registrar("rectangle", &CreateRectangle);

}  // namespace
}  // namespace shapes
