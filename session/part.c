#include <errno.h>

#include "part.h"

int section_add(struct section_list *l, uint32_t kind, const void *data, size_t len,
		struct why *why)
{
	if (l->n == l->max)
		return why_set(why, -ENOSPC, "more than %d sections in one image", l->max);
	l->v[l->n++] = (struct section){kind, data, len};
	return 0;
}
