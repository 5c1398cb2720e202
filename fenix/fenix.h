/* Fenix 1.0 (SAND2016-9171) on stasis: one header for both dialects, the
 * spec's and the public Fenix library's (sandialabs/Fenix f98f83b, "the
 * reference"), so that code written to either compiles unchanged. Where the
 * two signatures differ, a macro picks the form by the number of arguments
 * (or, for Fenix_Init, by the type of the first one); such names cannot be
 * taken as function pointers (README.md "Fenix"). Result codes have the
 * reference's values. The data lives in stasis's store, protected by its
 * redundancy sets (fenix/ in the stasis tree). */
#ifndef STASIS_FENIX_H
#define STASIS_FENIX_H

#include <mpi.h>
/* What the reference's fenix.h brings along, and its examples rely on. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#ifdef __cplusplus
extern "C" {
#endif
/* The library is built with hidden visibility: what this header declares
 * is its interface (libfenix.map keeps it to Fenix_*). */
#pragma GCC visibility push(default)

#define FENIX_SUCCESS 0
#define FENIX_ERROR_UNINITIALIZED -9
#define FENIX_ERROR_NOCATEGORY -10
#define FENIX_ERROR_CALLBACK_NOT_REGISTERED -11
#define FENIX_ERROR_GROUP_CREATE -12
#define FENIX_ERROR_MEMBER_CREATE -13
#define FENIX_ERROR_COMMIT_BARRIER -133
#define FENIX_ERROR_INVALID_GROUPID -14
#define FENIX_ERROR_INVALID_MEMBERID -15
#define FENIX_ERROR_INVALID_LOGIC_CALL -155
#define FENIX_ERROR_INVALID_TIMESTAMP -16
#define FENIX_ERROR_INVALID_DEPTH -17
#define FENIX_ERROR_INVALID_ATTRIBUTE_NAME -18
#define FENIX_ERROR_INVALID_ATTRIBUTE_VALUE -19
#define FENIX_ERROR_INVALID_POSITION -20
#define FENIX_ERROR_DATA_WAIT -21
#define FENIX_ERROR_SUBSET_NUM_BLOCKS -22
#define FENIX_ERROR_SUBSET_START_OFFSET -23
#define FENIX_ERROR_SUBSET_END_OFFSET -24
#define FENIX_ERROR_SUBSET_STRIDE -25
#define FENIX_ERROR_NODATA_FOUND -30
#define FENIX_ERROR_INTERN -40
#define FENIX_ERROR_CANCELLED -50
#define FENIX_ERROR_SPAWNING_FAILED -60 /* spec only */
#define FENIX_WARNING_SPARE_RANKS_DEPLETED 100
#define FENIX_WARNING_PARTIAL_RESTORE 101

typedef enum {
	FENIX_ROLE_INITIAL_RANK = 0,
	FENIX_ROLE_RECOVERED_RANK = 1,
	FENIX_ROLE_SURVIVOR_RANK = 2
} Fenix_Rank_role;

/* The spec asks for >= 2^30; the reference's 11 and 12 are bugs. The world
 * group's id lies outside the user range. */
#define FENIX_GROUP_ID_MAX (1 << 30)
#define FENIX_MEMBER_ID_MAX (1 << 30)
#define FENIX_TIME_STAMP_MAX (1 << 30)
#define FENIX_DATA_GROUP_WORLD_ID ((1 << 30) + 1)
#define FENIX_DATA_MEMBER_ALL (-2)
#define FENIX_DATA_SNAPSHOT_LATEST (-1)
#define FENIX_DATA_SNAPSHOT_ALL (-3)
#define FENIX_DATA_MEMBER_ATTRIBUTE_BUFFER 11
#define FENIX_DATA_MEMBER_ATTRIBUTE_COUNT 12
#define FENIX_DATA_MEMBER_ATTRIBUTE_DATATYPE 13
#define FENIX_DATA_MEMBER_ATTRIBUTE_SIZE 14
/* The spec's other spellings. */
#define FENIX_DATA_MEMBER_ATTRIBUTE_SOURCE_BUFFER FENIX_DATA_MEMBER_ATTRIBUTE_BUFFER
#define FENIX_DATA_GROUP_MEMBER_ATTRIBUTE_COUNT FENIX_DATA_MEMBER_ATTRIBUTE_COUNT
#define FENIX_DATA_GROUP_MEMBER_ATTRIBUTE_DATATYPE FENIX_DATA_MEMBER_ATTRIBUTE_DATATYPE
#define FENIX_DATA_SUBSET_CREATED 2

/* Policies. Reference: IN_MEMORY_RAID with int[3] {mode 1 (partner) or 5
 * (xor), rank separation, set size}. Spec: PEER_RANK_SEPARATION, one int
 * (a partner copy). stasis: STASIS with int[3] {0 partner, 1 xor, 2 rs;
 * set size; rs k}. */
#define FENIX_DATA_POLICY_IN_MEMORY_RAID 13
#define FENIX_DATA_POLICY_PEER_RANK_SEPARATION 17
#define FENIX_DATA_POLICY_STASIS 18

typedef struct {
	int specifier; /* FULL, EMPTY, NULL or CREATED */
	int num_blocks;
	int *start_offsets; /* first element of each block */
	int *end_offsets;   /* last element of each block (inclusive) */
	int stride;	    /* strided form: block i is start + i*stride .. end + i*stride */
} Fenix_Data_subset;

#define FENIX_DATA_SUBSET_SPEC_FULL 0
#define FENIX_DATA_SUBSET_SPEC_EMPTY 1
#define FENIX_DATA_SUBSET_SPEC_NULL 3
extern const Fenix_Data_subset FENIX_DATA_SUBSET_FULL;
extern const Fenix_Data_subset FENIX_DATA_SUBSET_EMPTY;
#define FENIX_SUBSET_NULL ((Fenix_Data_subset){FENIX_DATA_SUBSET_SPEC_NULL, 0, 0, 0, 0})

/* A request of istore: stores complete before istore returns (README). */
typedef struct {
	MPI_Request mpi_send_req;
	MPI_Request mpi_recv_req;
} Fenix_Request;

/* ---- process recovery ---- */
void Fenix_Init_spec(MPI_Comm comm, MPI_Comm *newcomm, int *role, int *argc, char ***argv,
		     int spare_ranks, int spawn, MPI_Info info, int *error);
void Fenix_Init_ref(int *role, MPI_Comm comm, MPI_Comm *newcomm, int *argc, char ***argv,
		    int spare_ranks, int spawn, MPI_Info info, int *error);
/* Reference: role first (an int *); spec: the communicator first. */
#define Fenix_Init(first, ...)                                                                     \
	_Generic((first), int *: Fenix_Init_ref, default: Fenix_Init_spec)(first, __VA_ARGS__)
int Fenix_Initialized(int *flag);
int Fenix_Callback_register(void (*recover)(MPI_Comm, int, void *), void *data);
int Fenix_Callback_pop(void);
int Fenix_Get_number_of_ranks_with_role(MPI_Comm comm, int role, int *n);
int Fenix_Get_role(MPI_Comm comm, int rank, int *role);
int Fenix_get_number_of_ranks_with_role(int role, int *n);
int Fenix_get_role(MPI_Comm comm, int rank, int *role);
int Fenix_Process_fail_list(int **fail_list);
int Fenix_Process_detect_failures(int do_recovery);
int Fenix_check_cancelled(MPI_Request *request, MPI_Status *status);
int Fenix_Finalize(void);

/* ---- data recovery ---- */
#define FENIX_NARG_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, N, ...) N
#define FENIX_NARG(...) FENIX_NARG_(__VA_ARGS__, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define FENIX_CAT_(a, b) a##b
#define FENIX_CAT(a, b) FENIX_CAT_(a, b)
#define FENIX_DISPATCH(name, ...) FENIX_CAT(name##_, FENIX_NARG(__VA_ARGS__))(__VA_ARGS__)

int Fenix_Data_group_create_4(int gid, MPI_Comm comm, int start_ts, int depth);
int Fenix_Data_group_create_7(int gid, MPI_Comm comm, int start_ts, int depth, int policy_name,
			      void *policy_value, int *flag);
#define Fenix_Data_group_create(...) FENIX_DISPATCH(Fenix_Data_group_create, __VA_ARGS__)
/* A policy given as a compound literal, (int[]){1, n/2} as the reference's
 * examples do, reaches the macro as 2 or 3 arguments: joined again here. */
#define Fenix_Data_group_create_8(g, c, t, d, p, v1, v2, f) Fenix_Data_group_create_7(g, c, t, d, p, v1, v2, f)
#define Fenix_Data_group_create_9(g, c, t, d, p, v1, v2, v3, f)                                    \
	Fenix_Data_group_create_7(g, c, t, d, p, v1, v2, v3, f)
int Fenix_Data_group_delete(int gid);
int Fenix_Data_member_create(int gid, int mid, void *buf, int count, MPI_Datatype dt);
int Fenix_Data_member_delete(int gid, int mid);
int Fenix_Data_group_get_redundancy_policy_spec(int gid, int policy_name, void *value, int *flag);
int Fenix_Data_group_get_redundancy_policy_ref(int gid, int *policy_name, void *value, int *flag);
#define Fenix_Data_group_get_redundancy_policy(gid, name, ...)                                     \
	_Generic((name), int *: Fenix_Data_group_get_redundancy_policy_ref,                       \
		 default: Fenix_Data_group_get_redundancy_policy_spec)(gid, name, __VA_ARGS__)
int Fenix_Data_group_set_redundancy_policy(int gid, int policy_name, void *value, int *flag);
int Fenix_Data_wait(Fenix_Request req);
int Fenix_Data_test(Fenix_Request req, int *flag);
int Fenix_Data_member_store(int gid, int mid, Fenix_Data_subset s);
int Fenix_Data_member_storev(int gid, int mid, Fenix_Data_subset s);
int Fenix_Data_member_istore(int gid, int mid, Fenix_Data_subset s, Fenix_Request *req);
int Fenix_Data_member_istorev(int gid, int mid, Fenix_Data_subset s, Fenix_Request *req);
int Fenix_Data_commit(int gid, int *ts);
int Fenix_Data_commit_barrier(int gid, int *ts);
int Fenix_Data_commit_cleanup(int gid, int *ts);
int Fenix_Data_barrier(int gid);
int Fenix_Data_cleanup(int gid);
int Fenix_Data_member_restore_5(int gid, int mid, void *target, int max_count, int ts);
int Fenix_Data_member_restore_6(int gid, int mid, void *target, int max_count, int ts,
				Fenix_Data_subset *found);
#define Fenix_Data_member_restore(...) FENIX_DISPATCH(Fenix_Data_member_restore, __VA_ARGS__)
int Fenix_Data_member_lrestore(int gid, int mid, void *target, int max_count, int ts,
			       Fenix_Data_subset *found);
int Fenix_Data_member_restore_from_rank_6(int gid, int mid, void *target, int max_count, int ts,
					  int source_rank);
int Fenix_Data_member_restore_from_rank_7(int gid, int mid, void *target, int max_count, int ts,
					  Fenix_Data_subset *found, int source_rank);
#define Fenix_Data_member_restore_from_rank(...)                                                   \
	FENIX_DISPATCH(Fenix_Data_member_restore_from_rank, __VA_ARGS__)
/* Spec: (nblocks, starts[], ends[], *s) = createv; reference: strided. */
int Fenix_Data_subset_create_5(int nblocks, int start, int end, int stride, Fenix_Data_subset *s);
int Fenix_Data_subset_createv(int nblocks, int *starts, int *ends, Fenix_Data_subset *s);
#define Fenix_Data_subset_create_4 Fenix_Data_subset_createv
#define Fenix_Data_subset_create(...) FENIX_DISPATCH(Fenix_Data_subset_create, __VA_ARGS__)
int Fenix_Data_subset_delete(Fenix_Data_subset *s);
int Fenix_Data_group_get_number_of_members(int gid, int *n);
int Fenix_Data_group_get_member_at_position(int gid, int *mid, int pos);
int Fenix_Data_group_get_number_of_snapshots(int gid, int *n);
int Fenix_Data_group_get_snapshot_at_position(int gid, int pos, int *ts);
int Fenix_Data_member_attr_get(int gid, int mid, int name, void *value, int *flag,
			       int source_rank);
int Fenix_Data_member_attr_set(int gid, int mid, int name, void *value, int *flag);
int Fenix_Data_snapshot_delete(int gid, int ts);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif
