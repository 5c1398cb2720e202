#define LOG_PREFIX "diskspace: "
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <isa-l/crc64.h>

#include "log.h"
#include "retention.h"
#include "session.h"
#include "diskspace.h"

/* The ranks whose checkpoint directories share a filesystem (same host,
 * same device): their needs add up against one free space. A runtime
 * global, made at the first use. */
static MPI_Comm fs_comm = MPI_COMM_NULL;

static void group_by_filesystem(struct session *s)
{
	char host[MPI_MAX_PROCESSOR_NAME + 32];
	struct stat sb;
	int len = 0;

	PMPI_Get_processor_name(host, &len);
	if (stat(s->store.dir, &sb) == 0)
		len += snprintf(host + len, sizeof(host) - len, ":%llu",
				(unsigned long long)sb.st_dev);
	/* Two filesystems whose keys collide count as one: their needs add
	 * up and the smaller free space counts, which only errs safe. */
	PMPI_Comm_split(s->comm,
			(int)(crc64_ecma_refl(0, (const unsigned char *)host, len) & 0x7fffffff),
			s->rank, &fs_comm);
}

uint64_t diskspace_image_bytes(const struct image_region *r, int n, bool full)
{
	uint64_t bytes =
	    STASIS_PAGE + ((uint64_t)n * sizeof(struct region_record) + STASIS_PAGE - 1) /
			      STASIS_PAGE * STASIS_PAGE;

	for (int i = 0; i < n; i++) {
		uint64_t pages = 0, words = (r[i].length / STASIS_PAGE + 63) / 64;

		if (full || !r[i].dirty) {
			bytes += r[i].length;
			continue;
		}
		for (uint64_t w = 0; w < words; w++)
			pages += __builtin_popcountll(r[i].dirty[w]);
		bytes += image_bitmap_bytes(r[i].length) + pages * STASIS_PAGE;
	}
	return bytes;
}

/* The redundancy file's size against its image's, from the newest
 * complete checkpoint of this rank (0: none, or scheme single). */
static double redundancy_ratio(struct session *s)
{
	char path[4200];
	struct stat img, red;

	store_path(&s->store, s->last_id, STORE_IMAGE, path, sizeof(path));
	if (stat(path, &img) || !img.st_size)
		return 0;
	store_path(&s->store, s->last_id, STORE_REDUNDANCY, path, sizeof(path));
	if (stat(path, &red))
		return 0;
	return (double)red.st_size / img.st_size;
}

bool diskspace_prefer_full(struct session *s, uint64_t full_bytes, uint64_t incr_bytes)
{
	struct statvfs vfs;
	double ratio = redundancy_ratio(s);
	/* full, incremental, what making room would free; then free space */
	uint64_t need[3], sum[3], avail = UINT64_MAX, least, room;
	int full;

	if (fs_comm == MPI_COMM_NULL)
		group_by_filesystem(s);
	need[0] = full_bytes * (1 + ratio);
	need[1] = incr_bytes * (1 + ratio);
	need[2] = retention_spare_bytes(s);
	if (statvfs(s->store.dir, &vfs) == 0)
		avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
	PMPI_Allreduce(need, sum, 3, MPI_UINT64_T, MPI_SUM, fs_comm);
	PMPI_Allreduce(&avail, &least, 1, MPI_UINT64_T, MPI_MIN, fs_comm);
	/* After this incremental image, could a full one still be written
	 * (the chain stays until then)? If not, and one fits now, now is the
	 * last chance to replace the chain. */
	room = least > UINT64_MAX - sum[2] ? UINT64_MAX : least + sum[2];
	full = room < sum[1] + sum[0] && room >= sum[0];
	PMPI_Allreduce(MPI_IN_PLACE, &full, 1, MPI_INT, MPI_LOR, s->comm);
	if (full && s->rank == 0)
		pr_debug("short of space: a full image in place of the chain of checkpoint %llu",
			 (unsigned long long)s->last_id);
	return full;
}
