/* The inside of stasis's Fenix (fenix.h): the state of the process, its
 * groups and members, and the snapshot files.
 *
 * Files, in <STASIS_DIR expanded>/<job key>/fenix/ (0700; files 0600):
 *   g<gid>.meta              the group's frozen policy (written at first store)
 *   g<gid>-t<ts>.c<slot>.dat the data <slot> (rank in the group comm at store
 *                            time) stored for snapshot ts: a header, then one
 *                            section per member (its stored blocks and bytes),
 *                            crc64 each (crc64_ecma_refl)
 *   g<gid>-t<ts>.c<slot>.red its redundancy file (redundancy/), written inside
 *                            store, which is collective
 *   g<gid>-t<ts>.c<slot>.done the commit record, written last (tmp, fsync,
 *                            rename, fsync dir): without it the snapshot of
 *                            that slot does not exist
 * A snapshot ts is consistent when every slot of the group has its .done
 * with the same member set. */
#ifndef STASIS_FENIX_INT_H
#define STASIS_FENIX_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "fenix.h"
#include "why.h"

#define FX_MAX_SNAPS 256 /* snapshots of one group a rank looks at */

struct fx_member {
	int mid;
	void *buf;
	int count;
	MPI_Datatype dt;
	int dtsize;
	/* Staged for the next commit: a copy of the whole extent and which
	 * elements were stored (repeated stores merge). */
	unsigned char *stage, *mask;
	int stage_count;
	/* Recreated from the snapshots on a relaunch (the spec's implicit
	 * re-creation): buffer unknown until attr_set or member_create. */
	bool implicit;
};

struct fx_group {
	int gid;
	MPI_Comm comm;
	int rank, size;
	int start_ts, depth, next_ts;
	int policy[3]; /* FENIX_DATA_POLICY_STASIS form: scheme, set size, k */
	bool frozen;   /* after the first store or commit */
	bool staged;   /* something stored since the last commit */
	struct fx_member *m;
	int nm;
	struct redundancy_set *set;
	/* An istore in flight (fx_async.c): a thread writes snapshot ts's .dat
	 * from the staging copy; its redundancy is encoded when it completes. */
	struct fx_async {
		/* The writer is detached and says it is done (fx_async.c):
		 * a transparent checkpoint never falls while it writes
		 * (fx_section_begin), so a restart finds it done. */
		bool pending;	     /* istored, not yet completed */
		atomic_bool written; /* the writer is done: ret and why are its */
		int ts, ret, section;
		struct why why;
	} async;
	struct fx_group *next;
};

/* Process recovery by relaunch (fx_proc.c): this launch's view of the
 * reference's world after every repair so far. */
struct fx_proc {
	int epoch;	  /* STASIS_FENIX_EPOCH: launches before this one */
	int *world;	  /* live processes (comm ranks) in Fenix world order */
	int nworld, nspare; /* its top nspare are spares */
	int *role;	  /* per rank of the resilient comm */
	int *fail, nfail; /* failed world positions of the last repair */
	int slot;	  /* this process's rank in the resilient comm, or -1 */
	int code;	  /* FENIX_SUCCESS or FENIX_WARNING_SPARE_RANKS_DEPLETED */
};

struct fx_state {
	bool init, finalized;
	MPI_Comm world; /* dup of Fenix_Init's comm */
	MPI_Comm comm;	/* the resilient comm (MPI_COMM_NULL on a spare) */
	int role, nspare;
	char dir[4200]; /* .../fenix */
	struct fx_group *groups;
	struct fx_proc proc;
};

extern struct fx_state fx;

struct fx_group *fx_group_find(int gid);
/* The initialised library's group gid in *g: 0, or the code the caller
 * returns (FENIX_ERROR_UNINITIALIZED, FENIX_ERROR_INVALID_GROUPID). */
int fx_group_get(int gid, struct fx_group **g);
struct fx_member *fx_member_find(struct fx_group *g, int mid);
int fx_group_make(int gid, MPI_Comm comm, int start_ts, int depth, const int policy[3]);
/* Same result on every rank of comm: the lowest code (errors < 0 win). */
int fx_agree(MPI_Comm comm, int code);
/* Print one line naming the cause (rank 0 of comm, or every rank when
 * all is true) and return code. */
int fx_say(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* fx_say on the speaker, on an error every rank of comm returns. */
int fx_say_before_return(MPI_Comm comm, bool speaker, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Relaunch recovery (fx_proc.c): fills fx.proc (fx.world and fx.dir set). */
int fx_proc_init(MPI_Comm comm, int spares, int spawn, struct fx_proc *p);
/* Mark this process as ended by the job, not failed (Fenix_Finalize). */
void fx_proc_survived(void);
/* A Fenix call: a survivor marker a SIGCONT wrote long ago was a resume
 * (job control), not the launcher ending the job: taken back. */
void fx_proc_still_running(void);

/* Snapshot files (fx_snap.c). */
void fx_name(char *buf, size_t len, int gid, int ts, int slot, const char *ext);
int fx_write_dat(struct fx_group *g, int ts, struct why *why);
int fx_write_done(struct fx_group *g, int ts, struct why *why);
/* The ts of every .done of (gid, slot) in the directory, ascending. */
int fx_list_done(int gid, int slot, int *ts, int max);
/* Is the .dat of (gid, ts, slot) present and every crc right? */
bool fx_dat_ok(int gid, int ts, int slot);
/* Whether this slot's .dat of snapshot ts exists (a stasis-restart may
 * roll the program back past files its killed run then pruned). */
bool fx_dat_present(const struct fx_group *g, int ts);
/* Merge member mid of (gid, ts, slot) into out/filled: elements not yet
 * filled get the stored value. *count: the member's stored count (may
 * grow out/filled via realloc-free check: returns -ERANGE if count >
 * cap). 0, -ENOENT (member not in that snapshot), -EBADMSG. */
int fx_merge(int gid, int ts, int slot, int mid, unsigned char *out, unsigned char *filled,
	     int cap, int dtsize, int *count);
int fx_consistent(struct fx_group *g, int *out);
int fx_read_done(int gid, int ts, int slot, int *size);
int fx_remove_snapshot(int gid, int ts, int slot);
/* The members stored in (gid, ts, slot), in creation order: {mid, dtsize,
 * count} each; their number, or -errno. */
int fx_members(int gid, int ts, int slot, int (*mi)[3], int max);
int fx_write_meta(struct fx_group *g);
int fx_read_meta(int gid, int policy[3]);

/* store and istore up to the data (fx_store.c), collective: a pending
 * istore completed, the subset checked on every rank, the stored elements
 * staged, the policy written at the first store. *g the group; a Fenix
 * code agreed over the group. */
int fx_stage_checked(int gid, int mid, const Fenix_Data_subset *s, struct fx_group **g);

/* istore in the background (fx_async.c). fx_async_start: the thread
 * writes g's staged data as snapshot ts. fx_async_join: local, waits for
 * it (every call that reads or changes the group's members first). Then
 * fx_async_finish, collective: joins, agrees on the result and encodes the
 * redundancy; a Fenix code (FENIX_SUCCESS when nothing was pending). */
int fx_async_start(struct fx_group *g, int ts, int section);
void fx_async_join(struct fx_group *g);
int fx_async_finish(struct fx_group *g, int error_code);

/* Under stasis-run (fx_section.c): a section of calls no checkpoint may
 * fall inside; begin returns the token end takes (0: no stasis). end may
 * run on another thread. */
int fx_section_begin(void);
void fx_section_end(int token);

/* Redundancy (fx_red.c). */
int fx_set(struct fx_group *g, struct why *why);
int fx_encode(struct fx_group *g, int ts, struct why *why);
/* Snapshot ts's redundancy made (the set first if need be), agreed by the
 * whole group: 0, or error_code on every rank after the lowest failed rank
 * (one that knows why first, session/agree.h) said why in one line naming
 * call. Collective. */
int fx_protect(struct fx_group *g, int ts, const char *call, int error_code);
int fx_rebuild(struct fx_group *g, int ts, bool have_mine, struct why *why);

#endif
