/* The program's standard input, when the launcher forwards it through a
 * pipe (mpirun ... < input gives rank 0 one): a restart is given the input
 * again from its start, while the program had read part of it (LAMMPS
 * reads its script from stdin as it runs, command after command). stasis
 * puts a pipe of its own between the two, filled by a thread of its own,
 * so that it knows at each checkpoint how many bytes the program took
 * (those it put in, less those still in the pipe). A restart skips as many
 * of the new input, after checking they are the same (the crc64 of the
 * first 64 KiB, the last 4 KiB byte for byte), and goes on from there; one
 * line says why otherwise. */
#ifndef STASIS_STDIN_RELAY_H
#define STASIS_STDIN_RELAY_H

#include <stdbool.h>

#include "part.h"

/* After MPI_Init, on a rank under stasis: put the relay in if descriptor 0
 * is a pipe or a socket. In a restart, its thread starts only once the
 * checkpoint's input has been skipped (the part's CHECK). */
void stdin_relay_install(bool restart);

extern const struct part_ops stdin_part;

#endif
