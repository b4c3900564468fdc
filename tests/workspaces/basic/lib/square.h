#pragma once
namespace lib {
int Square(int x);
int Cube(int x);
const char* Unused();
}  // namespace lib
extern "C" int asm_answer();
