int b(int);
int c(int);
int a(int x){ return b(x)+c(x); }
int main(void){ return a(1); }
