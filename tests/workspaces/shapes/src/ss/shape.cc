namespace ss {
struct Shape {
  virtual ~Shape() = default;
  virtual int Area() const = 0;
};
struct Rect : Shape {
  int w, h;
  Rect(int w, int h) : w(w), h(h) {}
  int Area() const override { return w * h; }
};
int RectArea(int w, int h) {
  Rect r(w, h);
  const Shape& s = r;
  return s.Area();
}
}  // namespace ss
