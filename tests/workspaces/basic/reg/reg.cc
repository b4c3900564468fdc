int RegTwice(int x) { return 2 * x; }
