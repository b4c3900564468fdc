int c(int x){ return x+3; }
