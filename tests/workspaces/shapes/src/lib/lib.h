#pragma once
namespace lib {
int Square(int x);
int Unused(int x);
}  // namespace lib
extern "C" int asm_ident(int x);
