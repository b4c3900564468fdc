int SsPlusOne(int x) { return x + 1; }
