/* dlopen(), dlmopen(), dlsym() and dlvsym() as the program and every
 * library call them. glibc takes the caller from the return address (a
 * bare name is searched with the caller's RUNPATH, RTLD_NEXT means "after
 * the caller"), so what stasis does not handle itself goes on to libc's
 * function by a jump, with the caller's return address still on the
 * stack (preload/dl.c has the rest). libc's functions are found once by
 * stasis_dl_resolve, without dlsym (which is this file's). */

/* Jump to the libc function whose address `ptr` holds, finding it first
 * if need be; the argument registers pass untouched. */
.macro LIBC_JUMP ptr
2:	mov \ptr(%rip), %rax
	test %rax, %rax
	jz 3f
	jmp *%rax
3:	push %rdi
	push %rsi
	push %rdx
	push %rcx
	push %r8
	push %r9
	sub $8, %rsp
	call stasis_dl_resolve
	add $8, %rsp
	pop %r9
	pop %r8
	pop %rcx
	pop %rdx
	pop %rsi
	pop %rdi
	jmp 2b
.endm

	.text

/* dlopen(file, mode): the program's own loads go to stasis_dlopen(file,
 * mode, caller), which returns to the caller. */
	.globl dlopen
	.type dlopen, @function
dlopen:
	push %rdi
	push %rsi
	sub $8, %rsp
	mov 24(%rsp), %rdx
	call stasis_dlopen_wanted
	add $8, %rsp
	pop %rsi
	pop %rdi
	test %eax, %eax
	jz 1f
	mov (%rsp), %rdx
	jmp stasis_dlopen
1:	LIBC_JUMP stasis_libc_dlopen
	.size dlopen, .-dlopen

/* dlmopen(lmid, file, mode): stasis_dlmopen_seen(caller) refuses it for
 * the program. */
	.globl dlmopen
	.type dlmopen, @function
dlmopen:
	push %rdi
	push %rsi
	push %rdx
	mov 24(%rsp), %rdi
	call stasis_dlmopen_seen
	pop %rdx
	pop %rsi
	pop %rdi
	LIBC_JUMP stasis_libc_dlmopen
	.size dlmopen, .-dlmopen

/* dlsym(handle, name), dlvsym(handle, name, version): a handle of the
 * program's (odd) is translated by stasis_dl_real(handle); the others,
 * RTLD_DEFAULT and RTLD_NEXT among them, pass untouched. */
	.globl dlsym
	.type dlsym, @function
dlsym:
	testb $1, %dil
	jz 1f
	push %rsi
	call stasis_dl_real
	pop %rsi
	mov %rax, %rdi
1:	LIBC_JUMP stasis_libc_dlsym
	.size dlsym, .-dlsym

	.globl dlvsym
	.type dlvsym, @function
dlvsym:
	testb $1, %dil
	jz 1f
	push %rsi
	push %rdx
	sub $8, %rsp
	call stasis_dl_real
	add $8, %rsp
	pop %rdx
	pop %rsi
	mov %rax, %rdi
1:	LIBC_JUMP stasis_libc_dlvsym
	.size dlvsym, .-dlvsym

	.section .note.GNU-stack, "", @progbits
