/* vfork() as the program calls it (Python's subprocess does): its child
 * runs in this process's memory until it execs, and the wrappers it
 * calls must leave stasis's state alone (util/runtime.h,
 * stasis_in_vfork_child). The calling thread is marked by
 * stasis_vfork_prepare (mappings.c), which gives libc's vfork; that is
 * reached by a jump, with the caller's return address on the stack: the
 * frame of a wrapper in C would not survive the child's return through it. */
	.text
	.globl vfork
	.type vfork, @function
vfork:
	sub $8, %rsp
	call stasis_vfork_prepare
	add $8, %rsp
	jmp *%rax
	.size vfork, .-vfork

	.section .note.GNU-stack, "", @progbits
