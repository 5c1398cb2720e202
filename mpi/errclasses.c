/* The program's error classes, codes and strings, recorded and made again
 * (errclasses.h). */
#include <errno.h>
#include <mpi.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "errclasses.h"
#include "export.h"
#include "runtime.h"
#include "session.h"

enum call { ADD_CLASS, ADD_CODE, ADD_STRING };

struct added {
	enum call call;
	int arg;    /* the class of a code, the code of a string */
	int result; /* the class or code MPI gave */
	char *string;
};

static struct added *calls;
static size_t ncalls, cap;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* A call that succeeded, noted (string: copied, len bytes, NULL for none).
 * Out of memory, the state cannot be kept: checkpoints stop, named. */
static void note(enum call call, int arg, int result, const char *string, size_t len)
{
	char *copy = NULL;

	if (string && !(copy = strndup(string, len))) {
		session_unsupported("MPI_Add_error_string (out of memory recording it)");
		return;
	}
	pthread_mutex_lock(&lock);
	if (ncalls == cap) {
		size_t n = cap ? 2 * cap : 16;
		struct added *grown = realloc(calls, n * sizeof(*grown));

		if (!grown) {
			pthread_mutex_unlock(&lock);
			free(copy);
			session_unsupported("MPI_Add_error_class (out of memory recording it)");
			return;
		}
		calls = grown;
		cap = n;
	}
	calls[ncalls++] = (struct added){call, arg, result, copy};
	pthread_mutex_unlock(&lock);
}

void errclasses_save(struct rec_builder *b)
{
	pthread_mutex_lock(&lock);
	recbuf_u64(b, ncalls);
	for (size_t i = 0; i < ncalls; i++) {
		recbuf_int(b, (int)calls[i].call);
		recbuf_int(b, calls[i].arg);
		recbuf_int(b, calls[i].result);
		recbuf_str(b, calls[i].string ? calls[i].string : "");
	}
	pthread_mutex_unlock(&lock);
}

int errclasses_replay(struct rec_reader *r, struct why *why)
{
	uint64_t n = recread_u64(r);

	for (uint64_t i = 0; i < n && !r->bad; i++) {
		enum call call = (enum call)recread_int(r);
		int arg = recread_int(r), want = recread_int(r), got = want, ret;
		const char *string = recread_str(r);

		if (r->bad)
			break;
		if (call == ADD_CLASS)
			ret = PMPI_Add_error_class(&got);
		else if (call == ADD_CODE)
			ret = PMPI_Add_error_code(arg, &got);
		else if (call == ADD_STRING)
			ret = PMPI_Add_error_string(arg, string);
		else
			return why_set(why, -EBADMSG, "the MPI state in the image is damaged");
		if (ret != MPI_SUCCESS)
			return why_set(why, -EIO, "MPI_Add_error_%s failed when made again",
				       call == ADD_CLASS ? "class" : call == ADD_CODE ? "code" : "string");
		if (got != want)
			return why_set(why, -EXDEV,
				       "MPI gave error %s %d where the program holds %d from before the "
				       "checkpoint",
				       call == ADD_CLASS ? "class" : "code", got, want);
		note(call, arg, want, call == ADD_STRING ? string : NULL, MPI_MAX_ERROR_STRING);
	}
	return r->bad ? why_set(why, -EBADMSG, "the MPI state in the image is damaged") : 0;
}

/* --- the program's calls ---------------------------------------------------- */

EXPORT int MPI_Add_error_class(int *errorclass)
{
	int ret;

	stasis_depth++;
	ret = PMPI_Add_error_class(errorclass);
	if (ret == MPI_SUCCESS)
		note(ADD_CLASS, 0, *errorclass, NULL, 0);
	stasis_depth--;
	return ret;
}

EXPORT int MPI_Add_error_code(int errorclass, int *errorcode)
{
	int ret;

	stasis_depth++;
	ret = PMPI_Add_error_code(errorclass, errorcode);
	if (ret == MPI_SUCCESS)
		note(ADD_CODE, errorclass, *errorcode, NULL, 0);
	stasis_depth--;
	return ret;
}

EXPORT int MPI_Add_error_string(int errorcode, const char *string)
{
	int ret;

	stasis_depth++;
	ret = PMPI_Add_error_string(errorcode, string);
	if (ret == MPI_SUCCESS)
		note(ADD_STRING, errorcode, 0, string, MPI_MAX_ERROR_STRING);
	stasis_depth--;
	return ret;
}

/* Fortran: the bindings call PMPI_* (not the wrappers above); the string
 * is blank-padded to its hidden length, which MPI trims. */
typedef void (*fortran_fn)();

EXPORT void mpi_add_error_class_(MPI_Fint *errorclass, MPI_Fint *ierr)
{
	stasis_depth++;
	((fortran_fn)stasis_next_symbol("mpi_add_error_class_"))(errorclass, ierr);
	if (*ierr == MPI_SUCCESS)
		note(ADD_CLASS, 0, *errorclass, NULL, 0);
	stasis_depth--;
}
FORTRAN_ALIASES(mpi_add_error_class, MPI_ADD_ERROR_CLASS)

EXPORT void mpi_add_error_code_(MPI_Fint *errorclass, MPI_Fint *errorcode, MPI_Fint *ierr)
{
	stasis_depth++;
	((fortran_fn)stasis_next_symbol("mpi_add_error_code_"))(errorclass, errorcode, ierr);
	if (*ierr == MPI_SUCCESS)
		note(ADD_CODE, *errorclass, *errorcode, NULL, 0);
	stasis_depth--;
}
FORTRAN_ALIASES(mpi_add_error_code, MPI_ADD_ERROR_CODE)

EXPORT void mpi_add_error_string_(MPI_Fint *errorcode, char *string, MPI_Fint *ierr, size_t len)
{
	size_t n = len;

	stasis_depth++;
	((fortran_fn)stasis_next_symbol("mpi_add_error_string_"))(errorcode, string, ierr, len);
	while (n && string[n - 1] == ' ')
		n--;
	if (*ierr == MPI_SUCCESS)
		note(ADD_STRING, *errorcode, 0, string, n);
	stasis_depth--;
}
FORTRAN_ALIASES(mpi_add_error_string, MPI_ADD_ERROR_STRING)
