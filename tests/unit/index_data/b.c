int b(int x){ return x*2; }
