/* Thread-local storage of the application (DESIGN.md section 10, "The
 * rest of a process"): what a checkpoint saves of each thread besides its
 * stack and registers, and a restart puts back.
 *
 * - Blocks: the TLS of the executable and of the application's libraries
 *   (x86_64 places static blocks at fixed distances below the thread
 *   pointer; a library loaded with dlopen() usually gets a block allocated
 *   on first use). libc's and stasis's blocks are the runtime's: errno,
 *   malloc's cache, stasis's depth counter are the new process's own.
 * - pthread keys the program made (CPython keeps its thread state under
 *   one) and each thread's value of them. Keys are numbered by libc from
 *   the lowest free one; a restart makes the program's keys again with the
 *   same numbers or stops with one line.
 *
 * The record is SECTION_TLS (format.h). */
#ifndef STASIS_TLS_H
#define STASIS_TLS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "image.h"
#include "why.h"

/* The preload layer's pthread_key_create()/pthread_key_delete(): every key
 * made or deleted, with the address the call returns to (it decides whose
 * key it is, possibly later: a library constructor may make one before
 * stasis has classified the loaded objects). tls_key_deleting runs before
 * the real deletion (libc may hand the number out again at once);
 * tls_key_kept undoes it when the deletion failed. */
void tls_key_created(pthread_key_t key, void (*destructor)(void *), uintptr_t caller);
void tls_key_deleting(pthread_key_t key);
void tls_key_kept(pthread_key_t key);

/* Saving, at a checkpoint, while every application thread is stopped:
 * tls_save_begin lists the application's TLS and keys and sizes the record
 * for nthreads threads; each thread then saves itself with tls_save_thread
 * (async-signal-safe: no allocation, no lock of stasis's; position is its
 * place among the nthreads sections, 0 the main thread's), and
 * tls_save_end gives the region. Return 0 or -errno. */
int tls_save_begin(uint32_t nthreads);
int tls_save_thread(uint32_t thread, uint32_t position);
int tls_save_end(struct image_region *out);

/* Restart, on the main thread, once the libraries the program loaded are
 * back and before its memory is: make the program's keys again with their
 * numbers, delete the ones it made in this process that the checkpoint
 * does not have. 0, or -errno with why set to one line. */
int tls_restore_keys(const void *rec, size_t len, struct why *why);

/* Put back the calling thread's blocks and key values (thread as in
 * tls_save_thread). The thread pointer must be the one saved. 0 or -errno
 * with why set. */
int tls_restore_thread(const void *rec, size_t len, uint32_t thread, struct why *why);

/* The calling thread's thread pointer (%fs base: its struct pthread). */
static inline uintptr_t tls_thread_pointer(void)
{
	uintptr_t tp;

	__asm__("mov %%fs:0, %0" : "=r"(tp));
	return tp;
}

#endif
