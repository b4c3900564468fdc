#pragma once
namespace lib {
// A virtual call across modules: with use_cfi=true it is CFI-checked (type metadata in the split LTO unit).
struct Shape {
  virtual int Sides() const = 0;
};
const Shape& Triangle();
}  // namespace lib
