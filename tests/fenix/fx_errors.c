/* The Fenix error cases of FENIX.md 5.6 and the spec's 3.5 example, np 4:
 * each check prints "ok: ..." or "FAIL: ..." with the code every rank got
 * (the codes are agreed over the ranks: rank 0 checks that all are equal).
 * Exit 0 only when every check passed on every rank. Spec dialect and
 * reference dialect both, through one fenix.h. */
#include <fenix.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int rank, size, failed;

static void check(const char *what, int got, int want)
{
	/* want may differ per rank (data checks): each rank judges its own. */
	int mine = got == want, same;
	MPI_Allreduce(&mine, &same, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
	if (!same)
		failed = 1;
	if (rank == 0)
		printf("%s: %s (rank 0 got %d, want %d, right on every rank: %s)\n", same ? "ok" : "FAIL", what,
		       got, want, same ? "yes" : "no");
}

int main(int argc, char **argv)
{
	Fenix_Data_subset sub;
	int flag = -1, ts, n;
	/* Subsets work before MPI_Init (reference example 05). */
	int sub_pre = Fenix_Data_subset_create(2, 0, 1, 4, &sub);
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	check("subset_create before MPI_Init", sub_pre, FENIX_SUCCESS);
	Fenix_Data_subset_delete(&sub);
	check("call before Fenix_Init: UNINITIALIZED", Fenix_Data_group_create(1, MPI_COMM_WORLD, 0, 0),
	      FENIX_ERROR_UNINITIALIZED);
	Fenix_Initialized(&flag);
	check("Fenix_Initialized before", flag, 0);

	MPI_Comm comm;
	int role, err;
	Fenix_Init(MPI_COMM_WORLD, &comm, &role, &argc, &argv, 0, 0, MPI_INFO_NULL, &err);
	check("Fenix_Init (spec dialect)", err, FENIX_SUCCESS);
	check("role INITIAL", role, FENIX_ROLE_INITIAL_RANK);
	Fenix_Initialized(&flag);
	check("Fenix_Initialized after", flag, 1);

	check("gid < 0", Fenix_Data_group_create(-1, comm, 0, 0), FENIX_ERROR_INVALID_GROUPID);
	check("gid >= MAX", Fenix_Data_group_create(FENIX_GROUP_ID_MAX, comm, 0, 0),
	      FENIX_ERROR_INVALID_GROUPID);
	check("start_ts < 0", Fenix_Data_group_create(1, comm, -1, 0), FENIX_ERROR_INVALID_TIMESTAMP);
	check("depth -2", Fenix_Data_group_create(1, comm, 0, -2), FENIX_ERROR_INVALID_DEPTH);
	check("delete WORLD_ID", Fenix_Data_group_delete(FENIX_DATA_GROUP_WORLD_ID),
	      FENIX_ERROR_INVALID_GROUPID);

	/* The spec's 3.5 example: restore at ts 1 walks back for member 0. */
	int a, b, new_a = -1, new_b = -1;
	check("group_create 4 args", Fenix_Data_group_create(1, comm, 0, -1), FENIX_SUCCESS);
	check("member_create a", Fenix_Data_member_create(1, 0, &a, 1, MPI_INT), FENIX_SUCCESS);
	check("member_create b", Fenix_Data_member_create(1, 1, &b, 1, MPI_INT), FENIX_SUCCESS);
	check("member_create twice", Fenix_Data_member_create(1, 1, &b, 1, MPI_INT),
	      FENIX_ERROR_INVALID_MEMBERID);
	check("store unknown member", Fenix_Data_member_store(1, 7, FENIX_DATA_SUBSET_FULL),
	      FENIX_ERROR_INVALID_MEMBERID);
	a = rank, b = rank + 1;
	Fenix_Data_member_store(1, 0, FENIX_DATA_SUBSET_FULL);
	Fenix_Data_member_store(1, 1, FENIX_DATA_SUBSET_FULL);
	Fenix_Data_commit(1, &ts);
	check("first commit ts", ts, 0);
	b = rank + 100;
	Fenix_Data_member_store(1, 1, FENIX_DATA_SUBSET_FULL);
	Fenix_Data_commit(1, &ts);
	a = rank + 200;
	Fenix_Data_member_store(1, 0, FENIX_DATA_SUBSET_FULL);
	Fenix_Data_commit(1, &ts);
	check("third commit ts", ts, 2);
	check("restore a at ts 1", Fenix_Data_member_restore(1, 0, &new_a, 1, 1), FENIX_SUCCESS);
	check("a = myrank", new_a, rank);
	check("restore b at ts 1", Fenix_Data_member_restore(1, 1, &new_b, 1, 1), FENIX_SUCCESS);
	check("b = myrank+100", new_b, rank + 100);
	Fenix_Data_member_restore(1, 0, &new_a, 1, FENIX_DATA_SNAPSHOT_LATEST);
	check("a latest = myrank+200", new_a, rank + 200);
	new_a = -5;
	Fenix_Data_member_restore(1, 0, &new_a, 1, 99);
	check("ts beyond newest = newest", new_a, rank + 200);
	check("ts older than oldest", Fenix_Data_member_restore(1, 0, &new_a, 1, -7),
	      FENIX_ERROR_INVALID_TIMESTAMP);
	check("restore of an unknown member", Fenix_Data_member_restore(1, 9, &new_a, 1, 1),
	      FENIX_ERROR_INVALID_MEMBERID);
	int tiny[1];
	check("restore into max_count 0", Fenix_Data_member_restore(1, 0, tiny, 0, 1),
	      FENIX_ERROR_INVALID_ATTRIBUTE_VALUE);
	new_b = -1;
	check("restore_from_rank", Fenix_Data_member_restore_from_rank(1, 1, &new_b, 1, 1,
								       (rank + 1) % size),
	      FENIX_SUCCESS);
	check("b from the next rank", new_b, (rank + 1) % size + 100);
	n = -1;
	Fenix_Data_group_get_number_of_snapshots(1, &n);
	check("depth -1 after 3 commits: 3 snapshots", n, 3);
	Fenix_Data_group_get_snapshot_at_position(1, 0, &ts);
	check("snapshot at position 0 is the newest", ts, 2);
	check("snapshot position out of range", Fenix_Data_group_get_snapshot_at_position(1, 3, &ts),
	      FENIX_ERROR_INVALID_POSITION);
	Fenix_Data_group_get_number_of_members(1, &n);
	check("number of members", n, 2);
	Fenix_Data_group_get_member_at_position(1, &n, 1);
	check("member at position 1", n, 1);
	check("member position out of range", Fenix_Data_group_get_member_at_position(1, &n, 2),
	      FENIX_ERROR_INVALID_POSITION);
	int pol = 1;
	Fenix_Data_group_set_redundancy_policy(1, FENIX_DATA_POLICY_PEER_RANK_SEPARATION, &pol, &flag);
	check("set_redundancy_policy after the first store: flag 0", flag, 0);
	int cnt = 5;
	flag = -1;
	Fenix_Data_member_attr_set(1, 0, FENIX_DATA_MEMBER_ATTRIBUTE_COUNT, &cnt, &flag);
	check("attr_set COUNT: flag 0", flag, 0);
	flag = -1;
	Fenix_Data_member_attr_set(1, 0, FENIX_DATA_MEMBER_ATTRIBUTE_DATATYPE, &cnt, &flag);
	check("attr_set DATATYPE: flag 0", flag, 0);
	check("attr_set unknown name", Fenix_Data_member_attr_set(1, 0, 999, &cnt, &flag),
	      FENIX_ERROR_INVALID_ATTRIBUTE_NAME);
	cnt = 0;
	Fenix_Data_member_attr_get(1, 0, FENIX_DATA_MEMBER_ATTRIBUTE_COUNT, &cnt, &flag, 0);
	check("attr_get COUNT", cnt, 1);
	check("snapshot_delete(ALL)", Fenix_Data_snapshot_delete(1, FENIX_DATA_SNAPSHOT_ALL),
	      FENIX_SUCCESS);
	Fenix_Data_group_get_number_of_snapshots(1, &n);
	check("after snapshot_delete(ALL): 0", n, 0);
	check("restore with no snapshot", Fenix_Data_member_restore(1, 0, &new_a, 1, 1),
	      FENIX_ERROR_NODATA_FOUND);
	check("snapshot_delete of a missing ts", Fenix_Data_snapshot_delete(1, 5),
	      FENIX_ERROR_INVALID_TIMESTAMP);

	/* Subsets (spec form = createv, reference form = strided). */
	int starts[2] = {0, 5}, ends[2] = {1, 3};
	check("subset start > end", Fenix_Data_subset_create(2, starts, ends, &sub),
	      FENIX_ERROR_SUBSET_START_OFFSET);
	check("subset nblocks 0", Fenix_Data_subset_create(0, starts, ends, &sub),
	      FENIX_ERROR_SUBSET_NUM_BLOCKS);
	ends[1] = 12;
	check("subset createv", Fenix_Data_subset_create(2, starts, ends, &sub), FENIX_SUCCESS);
	int arr[10], out[10];
	int policy[3] = {5, 1, size}; /* reference: IN_MEMORY_RAID xor */
	check("group_create 7 args (reference)",
	      Fenix_Data_group_create(2, comm, 0, 0, FENIX_DATA_POLICY_IN_MEMORY_RAID, policy, &flag),
	      FENIX_SUCCESS);
	Fenix_Data_member_create(2, 0, arr, 10, MPI_INT);
	check("subset end >= count", Fenix_Data_member_store(2, 0, sub),
	      FENIX_ERROR_SUBSET_END_OFFSET);
	Fenix_Data_subset_delete(&sub);
	/* Increments: ts 0 full, ts 1 elements 2..3, ts 2 strided 6,8 */
	for (int i = 0; i < 10; i++)
		arr[i] = rank * 1000 + i;
	Fenix_Data_member_store(2, 0, FENIX_DATA_SUBSET_FULL);
	Fenix_Data_commit_barrier(2, &ts);
	for (int i = 0; i < 10; i++)
		arr[i] = -1;
	arr[2] = 2002, arr[3] = 2003;
	int s1[1] = {2}, e1[1] = {3};
	Fenix_Data_subset_create(1, s1, e1, &sub);
	Fenix_Data_member_store(2, 0, sub);
	Fenix_Data_subset_delete(&sub);
	Fenix_Data_commit(2, &ts);
	arr[6] = 3006, arr[8] = 3008;
	Fenix_Data_subset_create(2, 6, 6, 2, &sub);
	Fenix_Data_member_store(2, 0, sub);
	Fenix_Data_subset_delete(&sub);
	/* depth 0 would now keep one snapshot: use depth -1 semantics check
	 * on group 1 instead; here restore merges across the increments. */
	Fenix_Data_commit(2, &ts);
	check("incremental ts", ts, 2);
	memset(out, 0, sizeof(out));
	Fenix_Data_member_restore(2, 0, out, 10, FENIX_DATA_SNAPSHOT_LATEST, NULL);
	int good = 1;
	for (int i = 0; i < 10; i++) {
		int want = i == 2 || i == 3 ? 2000 + i : i == 6 || i == 8 ? 3000 + i : rank * 1000 + i;
		good &= out[i] == want;
	}
	check("increments merged at restore", good, 1);

	/* depth 0: after 3 commit_barriers, one snapshot. */
	Fenix_Data_group_create(3, comm, 0, 0);
	Fenix_Data_member_create(3, 0, &a, 1, MPI_INT);
	for (int i = 0; i < 3; i++) {
		Fenix_Data_member_store(3, 0, FENIX_DATA_SUBSET_FULL);
		Fenix_Data_commit_barrier(3, &ts);
	}
	Fenix_Data_group_get_number_of_snapshots(3, &n);
	check("depth 0 after 3 commit_barriers: 1 snapshot", n, 1);

	/* One rank skipping a commit: that ts is not consistent. */
	Fenix_Data_group_create(4, comm, 0, -1);
	Fenix_Data_member_create(4, 0, &a, 1, MPI_INT);
	a = 10 + rank;
	Fenix_Data_member_store(4, 0, FENIX_DATA_SUBSET_FULL);
	Fenix_Data_commit(4, &ts);
	a = 20 + rank;
	Fenix_Data_member_store(4, 0, FENIX_DATA_SUBSET_FULL);
	if (rank != 1)
		Fenix_Data_commit(4, &ts);
	Fenix_Data_group_get_number_of_snapshots(4, &n);
	check("a ts one rank skipped is not counted", n, 1);
	new_a = -1;
	Fenix_Data_member_restore(4, 0, &new_a, 1, FENIX_DATA_SNAPSHOT_LATEST);
	check("restore falls back to the older snapshot", new_a, 10 + rank);

	/* istore: the program's buffer may change once istore returns; the
	 * snapshot holds what it was. */
	Fenix_Request req = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
	check("wait on a null request", Fenix_Data_wait(req), FENIX_SUCCESS);
	flag = 0;
	Fenix_Data_test(req, &flag);
	check("test on a null request: flag 1", flag, 1);
	int big[4096];
	Fenix_Data_group_create(5, comm, 0, -1);
	Fenix_Data_member_create(5, 0, big, 4096, MPI_INT);
	for (int i = 0; i < 4096; i++)
		big[i] = rank * 7 + i;
	check("istore", Fenix_Data_member_istore(5, 0, FENIX_DATA_SUBSET_FULL, &req), FENIX_SUCCESS);
	memset(big, 0, sizeof(big));
	do
		Fenix_Data_test(req, &flag);
	while (!flag);
	check("wait", Fenix_Data_wait(req), FENIX_SUCCESS);
	check("wait again", Fenix_Data_wait(req), FENIX_SUCCESS);
	Fenix_Data_commit(5, &ts);
	check("istore's commit ts", ts, 0);
	Fenix_Data_member_restore(5, 0, big, 4096, 0);
	int same = 1;
	for (int i = 0; i < 4096; i++)
		same &= big[i] == rank * 7 + i;
	check("istore stored the buffer as it was at istore", same, 1);
	/* Tested, not waited for: commit completes it. */
	big[5] = -5;
	Fenix_Data_member_istore(5, 0, FENIX_DATA_SUBSET_FULL, &req);
	do
		Fenix_Data_test(req, &flag);
	while (!flag);
	check("commit of an istore only tested", Fenix_Data_commit(5, &ts), FENIX_SUCCESS);
	new_a = 0;
	Fenix_Data_member_restore(5, 0, big, 4096, 1);
	check("its snapshot", big[5], -5);
	/* The background write fails on rank 1 (its temporary file's name
	 * taken by a directory: root writes anyway where modes forbid):
	 * istore returns, wait says so on every rank. */
	char dir[4300];
	const char *base = getenv("STASIS_DIR");
	snprintf(dir, sizeof(dir), "%s", base ? base : ".");
	char *r = strstr(dir, "%r");
	if (r) {
		char tail[4300];
		snprintf(tail, sizeof(tail), "%s", r + 2);
		snprintf(r, sizeof(dir) - (size_t)(r - dir), "%d%s", rank, tail);
	}
	size_t at = strlen(dir);
	snprintf(dir + at, sizeof(dir) - at, "/fx/fenix/g5-t2.c%d.dat.tmp", rank);
	if (rank == 1 && mkdir(dir, 0700))
		perror(dir);
	check("istore whose write will fail", Fenix_Data_member_istore(5, 0, FENIX_DATA_SUBSET_FULL, &req),
	      FENIX_SUCCESS);
	check("wait: DATA_WAIT", Fenix_Data_wait(req), FENIX_ERROR_DATA_WAIT);
	if (rank == 1)
		rmdir(dir);
	check("store after it", Fenix_Data_member_store(5, 0, FENIX_DATA_SUBSET_FULL), FENIX_SUCCESS);
	Fenix_Data_commit(5, &ts);
	check("commit after it: ts 2", ts, 2);
	Fenix_Data_group_get_number_of_snapshots(5, &n);
	check("3 snapshots of group 5", n, 3);
	check("group_delete 5", Fenix_Data_group_delete(5), FENIX_SUCCESS);

	check("group_delete", Fenix_Data_group_delete(4), FENIX_SUCCESS);
	check("group_delete twice", Fenix_Data_group_delete(4), FENIX_ERROR_INVALID_GROUPID);
	check("Fenix_Finalize", Fenix_Finalize(), FENIX_SUCCESS);
	check("Fenix_Finalize twice", Fenix_Finalize(), FENIX_ERROR_UNINITIALIZED);
	if (rank == 0)
		printf("%s\n", failed ? "FAILED" : "ALL OK");
	MPI_Finalize();
	return failed;
}
