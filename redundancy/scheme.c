/* The redundancy schemes, by the name a user gives (STASIS_SCHEME) and by
 * the id their files carry: the one list of them. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

static const struct scheme_ops *const schemes[] = {
    &scheme_single,
    &scheme_partner,
    &scheme_xor,
    &scheme_rs,
};

#define NSCHEMES (sizeof(schemes) / sizeof(schemes[0]))

const struct scheme_ops *scheme_find(const char *name)
{
	for (size_t i = 0; name && i < NSCHEMES; i++)
		if (!strcmp(schemes[i]->name, name))
			return schemes[i];
	return NULL;
}

const struct scheme_ops *scheme_by_id(uint32_t id)
{
	for (size_t i = 0; i < NSCHEMES; i++)
		if (schemes[i]->id == id)
			return schemes[i];
	return NULL;
}

const char *scheme_name(const struct scheme_ops *scheme)
{
	return scheme->name;
}

const char *scheme_names(void)
{
	static char names[64];
	size_t n = 0;

	/* Built once; the same bytes whoever builds them. */
	if (names[0])
		return names;
	for (size_t i = 0; i < NSCHEMES && n < sizeof(names); i++)
		n +=
		    snprintf(names + n, sizeof(names) - n, "%s%s", i ? ", " : "", schemes[i]->name);
	return names;
}
