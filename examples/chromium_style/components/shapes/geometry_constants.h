// Constants shared by the shape implementations.

#ifndef COMPONENTS_SHAPES_GEOMETRY_CONSTANTS_H_
#define COMPONENTS_SHAPES_GEOMETRY_CONSTANTS_H_

namespace shapes {

// The double closest to pi (equal to M_PI and Python's math.pi).
constexpr double kPi = 3.141592653589793;

}  // namespace shapes

#endif  // COMPONENTS_SHAPES_GEOMETRY_CONSTANTS_H_
