/* Restart (DESIGN.md section 7): inside MPI_Init of a new mpirun, after the
 * real MPI_Init, put the application image back and resume in it. */
#ifndef STASIS_RESTORE_H
#define STASIS_RESTORE_H

#include <stddef.h>

struct session;

/* Collective over the world. Agree on the newest checkpoint that is
 * complete and intact on every rank (older ones are tried when the newest
 * is not), verify every checksum, load the images, switch to a temporary
 * stack, write the image back and jump into the checkpoint. Returns only on
 * failure: -errno, after one rank printed the one line naming the cause.
 * Nothing on disk is changed. */
int restore_latest(struct session *s);

#endif
