#define LOG_PREFIX "comms: "
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collective_counts.h"
#include "comms.h"
#include "log.h"
#include "session.h"

/* Tag of the replay's MPI_Comm_create_group and MPI_Intercomm_create
 * calls; no message of the program is in flight while it runs. */
#define REPLAY_TAG 0x5a5a

static MPI_Group world_group = MPI_GROUP_NULL;
static int world_size;

int comms_init(void)
{
	int ret = PMPI_Comm_group(MPI_COMM_WORLD, &world_group);

	if (!ret)
		ret = PMPI_Comm_size(MPI_COMM_WORLD, &world_size);
	return ret == MPI_SUCCESS ? 0 : -EINVAL;
}

/* The world ranks of g's members, in g's order; -EXDEV for a process
 * outside MPI_COMM_WORLD (spawned or connected). */
static int describe_group(struct rec_builder *b, MPI_Group g)
{
	int n, *ranks, *world, ret = 0;

	if (PMPI_Group_size(g, &n) != MPI_SUCCESS)
		return -EINVAL;
	ranks = malloc(sizeof(int) * (n + 1));
	world = malloc(sizeof(int) * (n + 1));
	if (!ranks || !world) {
		ret = -ENOMEM;
		goto out;
	}
	for (int i = 0; i < n; i++)
		ranks[i] = i;
	if (PMPI_Group_translate_ranks(g, n, ranks, world_group, world) != MPI_SUCCESS) {
		ret = -EINVAL;
		goto out;
	}
	for (int i = 0; i < n; i++)
		if (world[i] == MPI_UNDEFINED)
			ret = -EXDEV;
	recbuf_ints(b, world, n);
out:
	free(ranks);
	free(world);
	return ret;
}

static int describe_topology(struct rec_builder *b, MPI_Comm c)
{
	int topo, n, m, w, *a = NULL, *x = NULL, *y = NULL, *z = NULL, ret = -ENOMEM;

	if (PMPI_Topo_test(c, &topo) != MPI_SUCCESS)
		return -EINVAL;
	recbuf_int(b, topo);
	switch (topo) {
	case MPI_CART:
		PMPI_Cartdim_get(c, &n);
		a = malloc(sizeof(int) * (n + 1));
		x = malloc(sizeof(int) * (n + 1));
		y = malloc(sizeof(int) * (n + 1));
		if (a && x && y && PMPI_Cart_get(c, n, a, x, y) == MPI_SUCCESS) {
			recbuf_ints(b, a, n);
			recbuf_ints(b, x, n);
			ret = 0;
		}
		break;
	case MPI_GRAPH:
		PMPI_Graphdims_get(c, &n, &m);
		a = malloc(sizeof(int) * (n + 1));
		x = malloc(sizeof(int) * (m + 1));
		if (a && x && PMPI_Graph_get(c, n, m, a, x) == MPI_SUCCESS) {
			recbuf_ints(b, a, n);
			recbuf_ints(b, x, m);
			ret = 0;
		}
		break;
	case MPI_DIST_GRAPH:
		PMPI_Dist_graph_neighbors_count(c, &n, &m, &w);
		a = malloc(sizeof(int) * (n + 1));
		x = malloc(sizeof(int) * (n + 1));
		y = malloc(sizeof(int) * (m + 1));
		z = malloc(sizeof(int) * (m + 1));
		if (a && x && y && z &&
		    PMPI_Dist_graph_neighbors(c, n, a, w ? x : MPI_UNWEIGHTED, m, y,
					      w ? z : MPI_UNWEIGHTED) == MPI_SUCCESS) {
			recbuf_int(b, w);
			recbuf_ints(b, a, n);
			recbuf_ints(b, x, n);
			recbuf_ints(b, y, m);
			recbuf_ints(b, z, m);
			ret = 0;
		}
		break;
	default:
		ret = 0;
	}
	free(a);
	free(x);
	free(y);
	free(z);
	return ret;
}

static int describe_comm(struct rec_builder *b, MPI_Comm c, int split_type, uint32_t *flags)
{
	int inter, size, ret;
	MPI_Group g;

	if (PMPI_Comm_test_inter(c, &inter) != MPI_SUCCESS || PMPI_Comm_size(c, &size))
		return -EINVAL;
	recbuf_int(b, inter);
	recbuf_int(b, split_type);
	if (PMPI_Comm_group(c, &g) != MPI_SUCCESS)
		return -EINVAL;
	ret = describe_group(b, g);
	PMPI_Group_free(&g);
	if (!ret && inter) {
		if (PMPI_Comm_remote_group(c, &g) != MPI_SUCCESS)
			return -EINVAL;
		ret = describe_group(b, g);
		PMPI_Group_free(&g);
	}
	if (!ret && !inter)
		ret = describe_topology(b, c);
	*flags = !inter && size == world_size ? VH_FULL : 0;
	return ret;
}

/* The peers of a communicator record: the world ranks of its group, or of
 * its remote group. Copies into r's scratch memory. */
static const int *record_peers(struct rec_reader *r, int *n, int *inter)
{
	const int *ranks;

	*inter = recread_int(r);
	recread_int(r); /* split type */
	ranks = recread_ints(r, n);
	if (*inter)
		ranks = recread_ints(r, n);
	return r->bad ? NULL : ranks;
}

/* Agree on the communicator's global id with its members (or take the
 * recorded one) and hang its collective counts on v; a new record gets the id
 * appended. 0 or -errno. */
static int attach_counts(struct mpi_record *rec, MPI_Comm v, MPI_Comm real, bool replay)
{
	struct rec_reader r = recread_open(rec->data, rec->len);
	int n, inter, ret = -EBADMSG;
	const int *peers = record_peers(&r, &n, &inter);
	uint64_t gid = 0;
	uint8_t *grown;

	if (!peers)
		goto out;
	if (replay) {
		if (rec->len < sizeof(gid))
			goto out;
		memcpy(&gid, rec->data + rec->len - sizeof(gid), sizeof(gid));
		ret = collective_counts_attach(v, real, peers, n, inter, gid) ? 0 : -EINVAL;
		goto out;
	}
	gid = collective_counts_attach(v, real, peers, n, inter, 0);
	grown = gid ? realloc(rec->data, rec->len + sizeof(gid)) : NULL;
	ret = -ENOMEM;
	if (grown) {
		memcpy(grown + rec->len, &gid, sizeof(gid));
		rec->data = grown;
		rec->len += sizeof(gid);
		ret = 0;
	}
out:
	recread_done(&r);
	return ret;
}

MPI_Comm mpi_comm_new(MPI_Comm real, int split_type, const char *call)
{
	struct rec_builder b = {0};
	uint32_t flags = 0;
	struct mpi_record *rec;
	MPI_Comm v;
	int ret;

	if (real == MPI_COMM_NULL)
		return real;
	ret = describe_comm(&b, real, split_type, &flags);
	if (ret == -EXDEV) {
		session_unsupported("a communicator with processes outside MPI_COMM_WORLD");
		b.failed = true;
	} else if (ret) {
		b.failed = true;
	}
	rec = rec_make(VH_COMM, &b, 0);
	v = vh_adopt(VH_COMM, real, rec, flags, call);
	/* Collective over the new communicator, like its creation. */
	if (v != real && attach_counts(rec, v, real, false))
		session_unsupported("a communicator whose members could not agree on its id");
	return v;
}

int comms_counts_replayed(struct mpi_record *rec, MPI_Comm v, MPI_Comm real)
{
	return attach_counts(rec, v, real, true);
}

MPI_Group mpi_group_new(MPI_Group real, const char *call)
{
	struct rec_builder b = {0};
	int ret;

	if (real == MPI_GROUP_NULL || real == MPI_GROUP_EMPTY)
		return real;
	ret = describe_group(&b, real);
	if (ret == -EXDEV)
		session_unsupported("a group with processes outside MPI_COMM_WORLD");
	if (ret)
		b.failed = true;
	return vh_adopt(VH_GROUP, real, rec_make(VH_GROUP, &b, 0), 0, call);
}

MPI_Fint mpi_comm_new_f(MPI_Fint real_f, int split_type, const char *call)
{
	return vh_keep_real_f(VH_COMM, mpi_comm_new(PMPI_Comm_f2c(real_f), split_type, call),
			      real_f);
}

MPI_Fint mpi_group_new_f(MPI_Fint real_f, const char *call)
{
	return vh_keep_real_f(VH_GROUP, mpi_group_new(PMPI_Group_f2c(real_f), call), real_f);
}

/* --- replay ----------------------------------------------------------------- */

static int create_intra(const int *ranks, int n, MPI_Comm *out)
{
	MPI_Group g;
	int ret = PMPI_Group_incl(world_group, n, ranks, &g);

	if (ret != MPI_SUCCESS)
		return -EINVAL;
	ret = PMPI_Comm_create_group(MPI_COMM_WORLD, g, REPLAY_TAG, out);
	PMPI_Group_free(&g);
	return ret == MPI_SUCCESS && *out != MPI_COMM_NULL ? 0 : -EINVAL;
}

static bool member(const int *ranks, int n)
{
	int me;

	PMPI_Comm_rank(MPI_COMM_WORLD, &me);
	for (int i = 0; i < n; i++)
		if (ranks[i] == me)
			return true;
	return false;
}

static bool valid_ranks(const int *ranks, int n)
{
	for (int i = 0; i < n; i++)
		if (ranks[i] < 0 || ranks[i] >= world_size)
			return false;
	return ranks && n > 0;
}

/* Put the recorded topology on c (replacing it), without reordering. */
static int replay_topology(struct rec_reader *r, MPI_Comm *c)
{
	int topo = recread_int(r), n, m, n2, m2, w, ret = MPI_SUCCESS;
	const int *a, *x, *y, *z;
	MPI_Comm t = MPI_COMM_NULL;

	switch (topo) {
	case MPI_CART:
		a = recread_ints(r, &n);
		x = recread_ints(r, &n2);
		if (r->bad || n2 != n || n < 0)
			return -EBADMSG;
		ret = PMPI_Cart_create(*c, n, a, x, 0, &t);
		break;
	case MPI_GRAPH:
		a = recread_ints(r, &n);
		x = recread_ints(r, &m);
		if (r->bad || n < 0 || m < 0)
			return -EBADMSG;
		ret = PMPI_Graph_create(*c, n, a, x, 0, &t);
		break;
	case MPI_DIST_GRAPH:
		w = recread_int(r);
		a = recread_ints(r, &n);
		x = recread_ints(r, &n2);
		y = recread_ints(r, &m);
		z = recread_ints(r, &m2);
		if (r->bad || n < 0 || m < 0)
			return -EBADMSG;
		ret = PMPI_Dist_graph_create_adjacent(*c, n, a, w ? x : MPI_UNWEIGHTED, m, y,
						      w ? z : MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &t);
		break;
	default:
		return r->bad ? -EBADMSG : 0;
	}
	if (ret != MPI_SUCCESS || t == MPI_COMM_NULL)
		return -EINVAL;
	PMPI_Comm_free(c);
	*c = t;
	return 0;
}

/* A communicator split by type (shared memory, ...) must still group
 * ranks that share what the type names. */
static bool split_still_holds(MPI_Comm c, int split_type)
{
	MPI_Comm chk;
	int ok = 0, a, b;

	if (PMPI_Comm_split_type(c, split_type, 0, MPI_INFO_NULL, &chk) == MPI_SUCCESS &&
	    chk != MPI_COMM_NULL) {
		PMPI_Comm_size(chk, &a);
		PMPI_Comm_size(c, &b);
		ok = a == b;
		PMPI_Comm_free(&chk);
	}
	PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, c);
	return ok;
}

int comms_replay_comm(const struct mpi_record *rec, MPI_Comm *out, uint32_t *flags, struct why *why)
{
	struct rec_reader r = recread_open(rec->data, rec->len);
	int inter = recread_int(&r), split = recread_int(&r), n, rn = 0, ret;
	const int *ranks = recread_ints(&r, &n), *remote = NULL;

	if (inter)
		remote = recread_ints(&r, &rn);
	/* The global id ends the record (comms_counts_replayed). */
	if (!r.bad && (size_t)(r.end - r.p) >= sizeof(uint64_t))
		r.end -= sizeof(uint64_t);
	ret = -EBADMSG;
	if (r.bad || !valid_ranks(ranks, n) || !member(ranks, n) ||
	    (inter && !valid_ranks(remote, rn)))
		goto out;
	ret = create_intra(ranks, n, out);
	if (ret)
		goto out;
	if (inter) {
		MPI_Comm local = *out;

		ret = PMPI_Intercomm_create(local, 0, MPI_COMM_WORLD, remote[0], REPLAY_TAG,
					    out) == MPI_SUCCESS ? 0 : -EINVAL;
		PMPI_Comm_free(&local);
	} else {
		ret = replay_topology(&r, out);
	}
	if (ret)
		goto out;
	*flags = !inter && n == world_size ? VH_FULL : 0;
	if (split != MPI_UNDEFINED && !split_still_holds(*out, split)) {
		/* As before structs: the last check that fails names it. */
		why_clear(why);
		why_set(why, -EXDEV,
			"a communicator made by MPI_Comm_split_type (type %d) of %d ranks starting "
			"at world rank %d groups ranks that no longer share what it split by: "
			"restart them placed as in the run it continues",
			split, n, ranks[0]);
	}
out:
	recread_done(&r);
	return ret;
}

int comms_replay_group(const struct mpi_record *rec, MPI_Group *out)
{
	struct rec_reader r = recread_open(rec->data, rec->len);
	int n, ret = -EBADMSG;
	const int *ranks = recread_ints(&r, &n);

	if (!r.bad && (n == 0 || valid_ranks(ranks, n)))
		ret = PMPI_Group_incl(world_group, n, ranks, out) == MPI_SUCCESS ? 0 : -EINVAL;
	recread_done(&r);
	return ret;
}
