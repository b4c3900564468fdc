int d_unused(int x){ return x+5; }
