#include <cstdio>
int main() { std::puts("colibri"); return 0; }
