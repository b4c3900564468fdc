  .text
  .globl asm_ident
  .type asm_ident, @function
asm_ident:
  movl %edi, %eax
  ret
  .size asm_ident, .-asm_ident
  .section .note.GNU-stack,"",@progbits
