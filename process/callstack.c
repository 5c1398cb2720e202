/* The application's call stack at a checkpoint (callstack.h). */
#define LOG_PREFIX "callstack: "
#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <libunwind.h>
#include <link.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "callstack.h"

#define WHERE_BYTES                                                                                \
	((sizeof(struct where_record) + STASIS_WHERE_FRAMES * sizeof(struct where_frame) +        \
	  STASIS_PAGE - 1) / STASIS_PAGE * STASIS_PAGE)

/* Page aligned: the image writer hands region data to O_DIRECT as it is. */
static union {
	struct where_record rec;
	char bytes[WHERE_BYTES];
} buf __attribute__((aligned(STASIS_PAGE)));

/* libunwind finds a name by reading the object's symbol table each time
 * (about 0.2 ms a frame, measured): a program checkpoints from the same few
 * call sites, so names are kept by address. */
#define NAME_CACHE 128
static struct {
	uint64_t ip, offset;
	char name[sizeof(((struct where_frame *)0)->function)];
} names[NAME_CACHE];
static unsigned names_used;

static void fill_name(unw_cursor_t *cursor, struct where_frame *f)
{
	unw_word_t offset = 0;
	unsigned i;

	for (i = 0; i < names_used; i++)
		if (names[i].ip == f->ip)
			break;
	if (i == names_used) {
		i = names_used < NAME_CACHE ? names_used++ : f->ip % NAME_CACHE;
		names[i].ip = f->ip;
		if (unw_get_proc_name(cursor, names[i].name, sizeof(names[i].name), &offset))
			names[i].name[0] = '\0';
		names[i].offset = offset;
	}
	memcpy(f->function, names[i].name, sizeof(f->function));
	f->symbol_offset = names[i].offset;
}

static void fill_object(struct where_frame *f, uintptr_t ip)
{
	static char exe[PATH_MAX];
	struct link_map *map = NULL;
	Dl_info info;

	if (!dladdr1((void *)ip, &info, (void **)&map, RTLD_DL_LINKMAP) || !map)
		return;
	f->object_bias = map->l_addr;
	/* The executable's link map has no name. */
	if (map->l_name && map->l_name[0]) {
		snprintf(f->object, sizeof(f->object), "%s", map->l_name);
		return;
	}
	if (!exe[0]) {
		ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

		exe[n > 0 ? n : 0] = '\0';
	}
	snprintf(f->object, sizeof(f->object), "%.255s", exe);
}

bool callstack_capture(struct image_region *out)
{
	struct where_record *rec = &buf.rec;
	unw_context_t context;
	unw_cursor_t cursor;
	Dl_info self;
	bool above = false;

	memset(&buf, 0, sizeof(buf));
	memcpy(rec->magic, STASIS_WHERE_MAGIC, sizeof(rec->magic));
	rec->frame_size = sizeof(struct where_frame);
	if (!dladdr((void *)callstack_capture, &self) || unw_getcontext(&context) ||
	    unw_init_local(&cursor, &context)) {
		pr_debug("cannot walk the stack");
		return false;
	}
	while (rec->nframes < STASIS_WHERE_FRAMES && unw_step(&cursor) > 0) {
		struct where_frame *f = &rec->frame[rec->nframes];
		unw_word_t ip;
		Dl_info info;

		if (unw_get_reg(&cursor, UNW_REG_IP, &ip) || !ip)
			break;
		/* stasis's own frames, up to and including the MPI wrapper the
		 * application called. */
		if (!above && dladdr((void *)ip, &info) && info.dli_fbase == self.dli_fbase)
			continue;
		above = true;
		f->ip = ip;
		fill_object(f, ip);
		fill_name(&cursor, f);
		rec->nframes++;
	}
	*out = (struct image_region){(uintptr_t)&buf, sizeof(buf), SECTION_CALLSTACK, NULL};
	return rec->nframes > 0;
}

/* --- the call-stack part (session/part.h): saved for stasis-inspect only ------------- */

static int callstack_part_save(uint64_t id, struct section_list *out, struct why *why)
{
	struct image_region r;

	(void)id;
	/* Not found (no frame above stasis's wrapper): no section, no error. */
	if (!callstack_capture(&r))
		return 0;
	return section_add(out, r.kind, (const void *)r.addr, r.length, why);
}

const struct part_ops callstack_part = {
    .name = "callstack",
    .save = callstack_part_save,
};
