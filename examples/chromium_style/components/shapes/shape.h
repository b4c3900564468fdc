// The Shape interface. Implementations live in their own translation units
// and are reached only through the registry (shape_registry.h) and the
// vtable.

#ifndef COMPONENTS_SHAPES_SHAPE_H_
#define COMPONENTS_SHAPES_SHAPE_H_

#include <string>

namespace shapes {

class Shape {
 public:
  virtual ~Shape();

  virtual const char* kind() const = 0;
  virtual double Area() const = 0;
  virtual double Perimeter() const = 0;

  // "<kind> area=<area> perimeter=<perimeter>" with three decimals.
  virtual std::string Describe() const;
};

}  // namespace shapes

#endif  // COMPONENTS_SHAPES_SHAPE_H_
