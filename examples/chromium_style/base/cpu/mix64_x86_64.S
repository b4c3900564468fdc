/* uint64_t base_mix64(uint64_t z) -- SplitMix64 finaliser, System V x86-64.
 * See base/cpu/mix64.h. The argument arrives in %rdi, the result goes in
 * %rax. */

        .text
        .globl  base_mix64
        .hidden base_mix64
        .type   base_mix64, @function
        .p2align 4
base_mix64:
        movq    %rdi, %rax
        shrq    $30, %rax
        xorq    %rdi, %rax
        movabsq $0xBF58476D1CE4E5B9, %rcx
        imulq   %rcx, %rax
        movq    %rax, %rdx
        shrq    $27, %rdx
        xorq    %rdx, %rax
        movabsq $0x94D049BB133111EB, %rcx
        imulq   %rcx, %rax
        movq    %rax, %rdx
        shrq    $31, %rdx
        xorq    %rdx, %rax
        ret
        .size   base_mix64, .-base_mix64

        .section .note.GNU-stack,"",@progbits
