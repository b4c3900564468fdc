struct A { virtual int f(); };
int A::f() { return 1; }
int g(A *a) { return a->f(); }
