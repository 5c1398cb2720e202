/* Shared-memory windows (MPI_Win_allocate_shared), made by stasis so that
 * a restart can make them again with their sharing.
 *
 * MPI's own segment is runtime memory a restart cannot have back at its
 * address, and a rank's image could not hold it anyway: the other ranks of
 * the node write it through their own mappings, which no dirty tracking of
 * this process sees. So stasis makes the segment: the window's first rank
 * creates a POSIX shared-memory object, every rank maps it whole at a place
 * of its own in a zone stasis reserves (outside the arena: never in the
 * memory regions), the name is unlinked once all have it, and the window is
 * MPI_Win_create over the rank's part. The parts follow each other in rank
 * order with no gap (the standard's default layout, which programs rely on;
 * alloc_shared_noncontig only allows another), and MPI_Win_shared_query
 * answers from the table made then.
 *
 * A checkpoint saves each rank's own part, whole, in SECTION_SHARED_WINDOWS
 * (every rank is stopped then, so the parts are of one instant); a restart
 * replays the window over a new segment mapped at the same place, then each
 * rank writes its part back before the ranks agree the stage is done (a
 * barrier of every rank), so that none reads a neighbour's part before it
 * is back.
 *
 * Where MPI makes no window over given memory (Open MPI 4.1 on one rank,
 * only osc/sm) or the zone cannot hold the segment, MPI's own shared window
 * is made as the program asked and checkpoints stop, named. */
#define LOG_PREFIX "windows: "
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "coord.h"
#include "export.h"
#include "handles.h"
#include "log.h"
#include "part.h"
#include "runtime.h"
#include "session.h"
#include "windows.h"
#include "windows_int.h"

/* Above the arena (16 TiB + 1 TiB): the same place in every run. */
#define ZONE_BASE ((uintptr_t)0x120000000000ULL)
#define ZONE_SIZE ((size_t)256 << 30)
#define MAX_SEGMENTS 256
#define MAX_MEMBERS 4096

struct segment {
	MPI_Win v; /* the program's window */
	uintptr_t addr;
	size_t len;
	int nranks, me;
	MPI_Aint *size, *offset; /* per rank of the window */
	int *disp;
};

static struct segment segs[MAX_SEGMENTS];
static int nsegs;
static bool zone_reserved;

static size_t page_round(size_t n)
{
	return (n + STASIS_PAGE - 1) / STASIS_PAGE * STASIS_PAGE;
}

static int zone_reserve(void)
{
	void *p;

	if (zone_reserved)
		return 0;
	p = mmap((void *)ZONE_BASE, ZONE_SIZE, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	if (p != (void *)ZONE_BASE) {
		munmap(p, ZONE_SIZE);
		return -EEXIST;
	}
	zone_reserved = true;
	return 0;
}

/* Give [addr, addr + len) back to the zone's reservation. */
static void zone_release(uintptr_t addr, size_t len)
{
	mmap((void *)addr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
	     -1, 0);
}

/* The lowest free place of len bytes in the zone, or 0. */
static uintptr_t zone_place(size_t len)
{
	uintptr_t at = ZONE_BASE;

	for (bool moved = true; moved;) {
		moved = false;
		for (int i = 0; i < nsegs; i++)
			if (at < segs[i].addr + segs[i].len && segs[i].addr < at + len) {
				at = segs[i].addr + segs[i].len;
				moved = true;
			}
	}
	return at + len <= ZONE_BASE + ZONE_SIZE ? at : 0;
}

static struct segment *segment_of(MPI_Win v)
{
	for (int i = 0; i < nsegs; i++)
		if (segs[i].v == v)
			return &segs[i];
	return NULL;
}

static void segment_drop(struct segment *s)
{
	munmap((void *)s->addr, s->len);
	zone_release(s->addr, s->len);
	free(s->size);
	free(s->offset);
	free(s->disp);
	*s = segs[--nsegs];
}

/* Collective over comm: a new shared-memory object of len bytes mapped at
 * addr on every rank. 0 on every rank, or -errno on every rank. */
static int map_segment(MPI_Comm comm, uintptr_t addr, size_t len)
{
	static unsigned serial;
	char name[64] = "";
	int me, fd = -1, ok = 1, all = 0;

	PMPI_Comm_rank(comm, &me);
	if (me == 0) {
		snprintf(name, sizeof(name), "/stasis-win-%d-%u", (int)getpid(), ++serial);
		fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0 || ftruncate(fd, (off_t)len)) {
			pr_warn("cannot make a shared-memory segment of %zu bytes (%s): %s", len, name,
				strerror(errno));
			name[0] = 0;
		}
	}
	PMPI_Bcast(name, sizeof(name), MPI_CHAR, 0, comm);
	if (!name[0])
		ok = 0;
	else if (me != 0)
		fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
	if (ok && (fd < 0 || mmap((void *)addr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
				  fd, 0) == MAP_FAILED))
		ok = 0;
	if (fd >= 0)
		close(fd);
	PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
	if (me == 0 && name[0])
		shm_unlink(name);
	if (all)
		return 0;
	if (ok)
		zone_release(addr, len);
	return -EIO;
}

/* The window's layout from every rank's size and unit: s filled, 0 or
 * -errno. */
static int layout(struct segment *s, const MPI_Aint *size, const int *disp, int nranks, int me)
{
	size_t total = 0;

	s->size = malloc(sizeof(MPI_Aint) * (size_t)nranks);
	s->offset = malloc(sizeof(MPI_Aint) * (size_t)nranks);
	s->disp = malloc(sizeof(int) * (size_t)nranks);
	if (!s->size || !s->offset || !s->disp)
		return -ENOMEM;
	for (int r = 0; r < nranks; r++) {
		if (size[r] < 0 || (size_t)size[r] > ZONE_SIZE)
			return -EINVAL;
		s->size[r] = size[r];
		s->disp[r] = disp[r];
		s->offset[r] = (MPI_Aint)total;
		total += (size_t)size[r];
	}
	s->nranks = nranks;
	s->me = me;
	s->len = page_round(total ? total : 1);
	return s->len <= ZONE_SIZE ? 0 : -ENOMEM;
}

static void layout_free(struct segment *s)
{
	free(s->size);
	free(s->offset);
	free(s->disp);
	s->size = s->offset = NULL;
	s->disp = NULL;
}

/* The record's extra: the segment and every rank's part. */
static void extra_build(struct rec_builder *b, const struct segment *s)
{
	recbuf_u64(b, s->addr);
	recbuf_u64(b, s->len);
	recbuf_int(b, s->me);
	recbuf_aints(b, s->size, s->nranks);
	recbuf_ints(b, s->disp, s->nranks);
}

/* Collective over real_comm: the segment made and mapped, s filled (addr
 * 0: choose one). 0 or -errno, the same on every rank. */
static int segment_make(MPI_Comm real_comm, MPI_Aint size, int disp_unit, struct segment *s)
{
	MPI_Aint *sizes;
	int *disps, nranks, me, ret, bad = 0, anybad = 0;

	PMPI_Comm_size(real_comm, &nranks);
	PMPI_Comm_rank(real_comm, &me);
	sizes = calloc((size_t)nranks, sizeof(*sizes));
	disps = calloc((size_t)nranks, sizeof(*disps));
	memset(s, 0, sizeof(*s));
	if (!sizes || !disps || nranks > MAX_MEMBERS || nsegs == MAX_SEGMENTS)
		bad = 1;
	if (!bad) {
		PMPI_Allgather(&size, 1, MPI_AINT, sizes, 1, MPI_AINT, real_comm);
		PMPI_Allgather(&disp_unit, 1, MPI_INT, disps, 1, MPI_INT, real_comm);
		bad = layout(s, sizes, disps, nranks, me) || zone_reserve() ||
		      !(s->addr = zone_place(s->len));
	}
	PMPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, real_comm);
	free(sizes);
	free(disps);
	ret = anybad ? -ENOSPC : map_segment(real_comm, s->addr, s->len);
	if (ret)
		layout_free(s);
	return ret;
}

/* MPI's own shared window, as the program asked, checkpoints off. */
static int unprotected(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm,
		       void *baseptr, MPI_Win *win, const char *why)
{
	static char feature[256];
	int ret = PMPI_Win_allocate_shared(size, disp_unit, VH_REAL(VH_INFO, MPI_Info, info),
					   VH_REAL(VH_COMM, MPI_Comm, comm), baseptr, win);

	if (ret == MPI_SUCCESS) {
		snprintf(feature, sizeof(feature), "MPI_Win_allocate_shared (%s)", why);
		session_unsupported(feature);
	}
	return ret;
}

EXPORT int MPI_Win_allocate_shared(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm,
				   void *baseptr, MPI_Win *win)
{
	MPI_Comm real_comm = VH_REAL(VH_COMM, MPI_Comm, comm);
	struct rec_builder extra = {0};
	struct segment s;
	void *base;
	int ret;

	if (!stasis_active)
		return PMPI_Win_allocate_shared(size, disp_unit, info, comm, baseptr, win);
	stasis_depth++;
	coord_entry();
	coord_collective(comm);
	if (segment_make(real_comm, size, disp_unit, &s)) {
		ret = unprotected(size, disp_unit, info, comm, baseptr, win,
				  "stasis could not make its segment");
		goto out;
	}
	base = (char *)s.addr + s.offset[s.me];
	ret = windows_create_quietly(base, size, disp_unit, VH_REAL(VH_INFO, MPI_Info, info),
				     real_comm, win);
	{
		int ok = ret == MPI_SUCCESS, all = 0;

		PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, real_comm);
		if (!all) {
			if (ok)
				PMPI_Win_free(win);
			munmap((void *)s.addr, s.len);
			zone_release(s.addr, s.len);
			layout_free(&s);
			ret = unprotected(size, disp_unit, info, comm, baseptr, win,
					  "this MPI makes no window over memory stasis places");
			goto out;
		}
	}
	extra_build(&extra, &s);
	*win = windows_made(real_comm, WF_SHARED, base, size, disp_unit, *win,
			    "MPI_Win_allocate_shared", extra.data, extra.failed ? 0 : extra.len);
	free(extra.data);
	s.v = *win;
	segs[nsegs++] = s;
	memcpy(baseptr, &base, sizeof(base));
out:
	coord_collective_done(comm);
	stasis_depth--;
	return ret;
}

EXPORT int MPI_Win_shared_query(MPI_Win win, int rank, MPI_Aint *size, int *disp_unit,
				void *baseptr)
{
	struct segment *s = segment_of(win);
	void *base;

	if (!s)
		return PMPI_Win_shared_query(VH_REAL(VH_WIN, MPI_Win, win), rank, size, disp_unit,
					     baseptr);
	if (rank == MPI_PROC_NULL) /* the lowest rank with memory */
		for (rank = 0; rank < s->nranks - 1 && !s->size[rank]; rank++)
			;
	if (rank < 0 || rank >= s->nranks)
		return MPI_ERR_RANK;
	*size = s->size[rank];
	*disp_unit = s->disp[rank];
	base = (char *)s->addr + s->offset[rank];
	memcpy(baseptr, &base, sizeof(base));
	return MPI_SUCCESS;
}

void windows_shared_freed(MPI_Win v)
{
	struct segment *s = segment_of(v);

	if (s)
		segment_drop(s);
}

/* --- restart --------------------------------------------------------------------- */

static int extra_read(struct rec_reader *r, struct segment *s)
{
	const MPI_Aint *size;
	const int *disp;
	int n, nd;

	memset(s, 0, sizeof(*s));
	s->addr = (uintptr_t)recread_u64(r);
	s->len = (size_t)recread_u64(r);
	s->me = recread_int(r);
	size = recread_aints(r, &n);
	disp = recread_ints(r, &nd);
	if (r->bad || n != nd || n < 1 || n > MAX_MEMBERS || s->me < 0 || s->me >= n)
		return -EBADMSG;
	{
		size_t len = s->len;
		uintptr_t addr = s->addr;
		int me = s->me;

		if (layout(s, size, disp, n, me) || s->len != len || addr < ZONE_BASE ||
		    addr + len > ZONE_BASE + ZONE_SIZE || addr % STASIS_PAGE) {
			layout_free(s);
			return -EBADMSG;
		}
		s->addr = addr;
	}
	return 0;
}

void windows_shared_skip(struct rec_reader *r)
{
	struct segment s;

	if (!extra_read(r, &s))
		layout_free(&s);
}

int windows_shared_replay(struct rec_reader *r, MPI_Win v, MPI_Comm real_comm, void *base,
			  MPI_Aint size, int disp_unit, MPI_Win *real, struct why *why)
{
	struct segment s;
	int bad, anybad = 0;

	bad = extra_read(r, &s) || nsegs == MAX_SEGMENTS || zone_reserve() ||
	      (char *)base != (char *)s.addr + s.offset[s.me] || size != s.size[s.me];
	if (!bad)
		for (int i = 0; i < nsegs; i++)
			bad |= s.addr < segs[i].addr + segs[i].len && segs[i].addr < s.addr + s.len;
	PMPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, real_comm);
	if (anybad) {
		layout_free(&s);
		return why_set(why, -EBADMSG, "the record of a shared-memory window is damaged");
	}
	if (map_segment(real_comm, s.addr, s.len)) {
		layout_free(&s);
		return why_set(why, -EIO, "cannot map a shared-memory window's segment again");
	}
	if (PMPI_Win_create(base, size, disp_unit, MPI_INFO_NULL, real_comm, real) !=
	    MPI_SUCCESS) {
		munmap((void *)s.addr, s.len);
		zone_release(s.addr, s.len);
		layout_free(&s);
		return why_set(why, -EIO, "cannot make a shared-memory window again");
	}
	s.v = v;
	segs[nsegs++] = s;
	return 0;
}

/* --- the part: this rank's parts, saved whole ----------------------------------- */

static void *out;
static size_t out_len;

static void shared_thaw(void)
{
	if (out)
		munmap(out, out_len);
	out = NULL;
}

static int shared_save(uint64_t id, struct section_list *l, struct why *why)
{
	struct shwin_record h = {.entry_size = sizeof(struct shwin_entry)};
	size_t len = sizeof(h), at;

	(void)id;
	shared_thaw();
	if (!nsegs)
		return 0;
	for (int i = 0; i < nsegs; i++)
		len += sizeof(struct shwin_entry) + ((size_t)segs[i].size[segs[i].me] + 7) / 8 * 8;
	len = page_round(len);
	out = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (out == MAP_FAILED) {
		out = NULL;
		return why_set(why, -ENOMEM, "no memory to save the shared-memory windows");
	}
	out_len = len;
	memcpy(h.magic, STASIS_SHWIN_MAGIC, 8);
	h.nwindows = (uint32_t)nsegs;
	memcpy(out, &h, sizeof(h));
	at = sizeof(h) + (size_t)nsegs * sizeof(struct shwin_entry);
	for (int i = 0; i < nsegs; i++) {
		const struct segment *s = &segs[i];
		struct shwin_entry e = {.base = s->addr + (uint64_t)s->offset[s->me],
					.len = (uint64_t)s->size[s->me]};

		memcpy((char *)out + sizeof(h) + (size_t)i * sizeof(e), &e, sizeof(e));
		memcpy((char *)out + at, (void *)(uintptr_t)e.base, e.len);
		at += (e.len + 7) / 8 * 8;
	}
	return section_add(l, SECTION_SHARED_WINDOWS, out, out_len, why);
}

/* RECREATE, after the MPI part made the windows again: each part written
 * back where a window of this rank now has it, checked first. */
static int shared_recreate(const struct restart_input *in, struct why *why)
{
	const struct section *sec = restart_section(in, SECTION_SHARED_WINDOWS);
	const struct shwin_record *h = sec->data;
	const struct shwin_entry *e;
	size_t at;

	if (!h)
		return 0;
	if (sec->len < sizeof(*h) || memcmp(h->magic, STASIS_SHWIN_MAGIC, 8) ||
	    h->entry_size != sizeof(*e) || h->nwindows > MAX_SEGMENTS ||
	    sec->len < sizeof(*h) + h->nwindows * sizeof(*e))
		return why_set(why, -EBADMSG, "the record of the shared-memory windows is damaged");
	e = (const struct shwin_entry *)(h + 1);
	at = sizeof(*h) + h->nwindows * sizeof(*e);
	for (uint32_t i = 0; i < h->nwindows; i++, e++) {
		bool mine = false;

		for (int k = 0; k < nsegs && !mine; k++)
			mine = e->base == segs[k].addr + (uint64_t)segs[k].offset[segs[k].me] &&
			       e->len == (uint64_t)segs[k].size[segs[k].me];
		if (!mine || e->len > sec->len - at)
			return why_set(why, -EBADMSG,
				       "a shared-memory window of the checkpoint is not where the "
				       "restart made it");
		memcpy((void *)(uintptr_t)e->base, (const char *)h + at, e->len);
		at += (e->len + 7) / 8 * 8;
	}
	return 0;
}

const struct part_ops shared_windows_part = {
    .name = "shared-windows",
    .save = shared_save,
    .thaw = shared_thaw,
    .recreate = shared_recreate,
};
