/* Fenix_Data_subset: blocks of element indices, end inclusive (spec 4.2 and
 * the reference agree). Usable before MPI_Init (the reference's example 05
 * makes one there): plain memory, no MPI. */
#include <stdlib.h>
#include <string.h>

#include "fenix_int.h"

const Fenix_Data_subset FENIX_DATA_SUBSET_FULL = {FENIX_DATA_SUBSET_SPEC_FULL, 0, 0, 0, 0};
const Fenix_Data_subset FENIX_DATA_SUBSET_EMPTY = {FENIX_DATA_SUBSET_SPEC_EMPTY, 0, 0, 0, 0};

static int make(int nblocks, const int *starts, const int *ends, int stride, Fenix_Data_subset *s)
{
	if (!s)
		return FENIX_ERROR_INVALID_ATTRIBUTE_VALUE;
	if (nblocks <= 0)
		return FENIX_ERROR_SUBSET_NUM_BLOCKS;
	for (int i = 0; i < nblocks; i++) {
		if (starts[i] < 0)
			return FENIX_ERROR_SUBSET_START_OFFSET;
		if (ends[i] < 0)
			return FENIX_ERROR_SUBSET_END_OFFSET;
		if (starts[i] > ends[i])
			return FENIX_ERROR_SUBSET_START_OFFSET;
	}
	int *st = malloc(sizeof(int) * (size_t)nblocks), *en = malloc(sizeof(int) * (size_t)nblocks);
	if (!st || !en) {
		free(st);
		free(en);
		return FENIX_ERROR_INTERN;
	}
	memcpy(st, starts, sizeof(int) * (size_t)nblocks);
	memcpy(en, ends, sizeof(int) * (size_t)nblocks);
	*s = (Fenix_Data_subset){FENIX_DATA_SUBSET_CREATED, nblocks, st, en, stride};
	return FENIX_SUCCESS;
}

int Fenix_Data_subset_createv(int nblocks, int *starts, int *ends, Fenix_Data_subset *s)
{
	if (nblocks > 0 && (!starts || !ends))
		return FENIX_ERROR_INVALID_ATTRIBUTE_VALUE;
	return make(nblocks, starts, ends, 0, s);
}

int Fenix_Data_subset_create_5(int nblocks, int start, int end, int stride, Fenix_Data_subset *s)
{
	if (nblocks <= 0)
		return FENIX_ERROR_SUBSET_NUM_BLOCKS;
	if (nblocks > 1 && stride <= end - start)
		return FENIX_ERROR_SUBSET_STRIDE;
	int *st = malloc(sizeof(int) * (size_t)nblocks), *en = malloc(sizeof(int) * (size_t)nblocks);
	if (!st || !en) {
		free(st);
		free(en);
		return FENIX_ERROR_INTERN;
	}
	for (int i = 0; i < nblocks; i++) {
		st[i] = start + i * stride;
		en[i] = end + i * stride;
	}
	int ret = make(nblocks, st, en, stride, s);
	free(st);
	free(en);
	return ret;
}

int Fenix_Data_subset_delete(Fenix_Data_subset *s)
{
	if (!s)
		return FENIX_ERROR_INVALID_ATTRIBUTE_VALUE;
	if (s->specifier == FENIX_DATA_SUBSET_CREATED) {
		free(s->start_offsets);
		free(s->end_offsets);
	}
	*s = FENIX_SUBSET_NULL;
	return FENIX_SUCCESS;
}
