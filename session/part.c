#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "part.h"

int section_add(struct section_list *l, uint32_t kind, const void *data, size_t len,
		struct why *why)
{
	if (l->n == l->max)
		return why_set(why, -ENOSPC, "more than %d sections in one image", l->max);
	l->v[l->n++] = (struct section){kind, data, len};
	return 0;
}

int section_buf_fill(struct section_buf *b, const void *data, size_t len, size_t *rounded)
{
	size_t need = (len + STASIS_PAGE - 1) / STASIS_PAGE * STASIS_PAGE;

	if (need > b->cap) {
		void *p = mmap(NULL, need * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			       -1, 0);

		if (p == MAP_FAILED)
			return -ENOMEM;
		if (b->data)
			munmap(b->data, b->cap);
		b->data = p;
		b->cap = need * 2;
	}
	memcpy(b->data, data, len);
	memset((char *)b->data + len, 0, need - len);
	*rounded = need;
	return 0;
}
