/*
 * eachobs_dlpack: a DLPack tensor over a held item (include/eachobs_dlpack.h).
 *
 * The tensor owns a reference to the iterator's arena, so the memory stays
 * when the iterator closes first, and its deleter gives the item back
 * through the arena (arena.c), which the consumer takes in at its next
 * call: the deleter never touches the iterator itself, which may be gone.
 */
#define _GNU_SOURCE
#include "eachobs_dlpack.h"
#include "internal.h"

#include <errno.h>
#include <stdlib.h>

struct tensor {
	DLManagedTensor m;   /* first: m.manager_ctx points back here */
	int64_t shape[EACHOBS_DLPACK_MAX_NDIM + 1];
	struct eachobs__arena *arena;
	const void *data;
};

static void deleter(DLManagedTensor *m)
{
	struct tensor *t = m->manager_ctx;

	eachobs__arena_give_back(t->arena, t->data);
	eachobs__arena_unref(t->arena);
	free(t);
}

/* The bytes of one observation the shape and dtype describe, or 0 when
 * they are not valid (0 is also a valid size: *ok says which). */
static size_t shape_bytes(DLDataType dtype, int ndim, const int64_t *shape,
			  bool *ok)
{
	size_t bytes = (size_t)dtype.bits / 8 * dtype.lanes;

	*ok = dtype.bits % 8 == 0 && dtype.bits > 0 && dtype.lanes > 0;
	for (int i = 0; *ok && i < ndim; i++) {
		if (shape[i] < 0 ||
		    (shape[i] && bytes > SIZE_MAX / (uint64_t)shape[i]))
			*ok = false;
		else
			bytes *= (size_t)shape[i];
	}
	return bytes;
}

static int check(const eachobs_iter *it, const void *data, DLDataType dtype,
		 int ndim, const int64_t *shape, DLManagedTensor **out)
{
	bool ok;

	if (!it || !data || !shape || !out)
		return eachobs__fail(-EINVAL, "eachobs_dlpack: %s is NULL",
				     !it ? "it" : !data ? "data"
					 : !shape ? "shape" : "out");
	if (ndim < 1 || ndim > EACHOBS_DLPACK_MAX_NDIM)
		return eachobs__fail(-EINVAL, "eachobs_dlpack: ndim %d is "
				     "outside 1..%d", ndim,
				     EACHOBS_DLPACK_MAX_NDIM);
	size_t bytes = shape_bytes(dtype, ndim, shape, &ok);
	if (!ok)
		return eachobs__fail(-EINVAL, "eachobs_dlpack: a negative size, "
				     "an overflow, or a dtype of %u bits x %u "
				     "lanes (whole bytes needed)",
				     dtype.bits, dtype.lanes);
	if (bytes != it->data.obs_size)
		return eachobs__fail(-EINVAL, "eachobs_dlpack: the shape makes "
				     "%zu bytes, obs_size is %zu", bytes,
				     it->data.obs_size);
	return 0;
}

int eachobs_dlpack(eachobs_iter *it, const void *data, DLDataType dtype,
		   int ndim, const int64_t *shape, DLManagedTensor **out)
{
	struct eachobs__buf b;
	int rc = check(it, data, dtype, ndim, shape, out);

	if (out)
		*out = NULL;
	if (rc < 0)
		return rc;
	struct tensor *t = calloc(1, sizeof(*t));
	if (!t)
		return eachobs__fail(-ENOMEM, "eachobs_dlpack: out of memory");
	rc = eachobs__hold_lend(&it->hold, data, &b);
	if (rc < 0) {
		free(t);
		return rc;
	}
	int lead = it->batchsize ? 1 : 0;
	if (lead)
		t->shape[0] = (int64_t)b.count;
	for (int i = 0; i < ndim; i++)
		t->shape[lead + i] = shape[i];
	t->arena = it->arena;
	t->data = data;
	eachobs__arena_ref(it->arena);
	t->m.dl_tensor = (DLTensor){
		.data = b.data,
		.device = { kDLCPU, 0 },
		.ndim = ndim + lead,
		.dtype = dtype,
		.shape = t->shape,
		.strides = NULL,
		.byte_offset = 0,
	};
	t->m.manager_ctx = t;
	t->m.deleter = deleter;
	*out = &t->m;
	return 0;
}
