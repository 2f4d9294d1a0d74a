/*
 * eachobs_dlpack: DLPack tensors over a held item (include/eachobs_dlpack.h).
 *
 * The tensors of one item share a lease: one reference to the iterator's
 * arena, so the memory stays when the iterator closes first, and a count
 * of the tensors not yet deleted. The last deleter gives the item back
 * through the arena (arena.c), which the consumer takes in at its next
 * call: a deleter never touches the iterator itself, which may be gone.
 * The lease and its tensors are one allocation, freed by the last deleter
 * (a framework does not touch a tensor after calling its deleter).
 */
#define _GNU_SOURCE
#include "eachobs_dlpack.h"
#include "internal.h"

#include <errno.h>
#include <stdlib.h>

struct tensor {
	DLManagedTensor m;   /* first: m.manager_ctx points back here */
	int64_t shape[EACHOBS_DLPACK_MAX_NDIM + 1];
	struct lease *lease;
};

struct lease {
	_Atomic size_t alive; /* tensors whose deleter has not run */
	struct eachobs__arena *arena;
	const void *data;
	struct tensor t[];
};

static void deleter(DLManagedTensor *m)
{
	struct lease *l = ((struct tensor *)m->manager_ctx)->lease;

	if (atomic_fetch_sub_explicit(&l->alive, 1, memory_order_acq_rel) != 1)
		return;
	eachobs__arena_give_back(l->arena, l->data);
	eachobs__arena_unref(l->arena);
	free(l);
}

/* The bytes of one observation's field the shape and dtype describe;
 * false when they are not valid (0 is also a valid size). */
static bool shape_bytes(DLDataType dtype, int ndim, const int64_t *shape,
			size_t *bytes)
{
	bool ok = dtype.bits % 8 == 0 && dtype.bits > 0 && dtype.lanes > 0;

	*bytes = (size_t)dtype.bits / 8 * dtype.lanes;
	for (int i = 0; ok && i < ndim; i++) {
		if (shape[i] < 0 ||
		    (shape[i] && *bytes > SIZE_MAX / (uint64_t)shape[i]))
			ok = false;
		else
			*bytes *= (size_t)shape[i];
	}
	return ok;
}

static int check_field(const eachobs_iter *it, size_t k, DLDataType dtype,
		       int ndim, const int64_t *shape, int min_ndim)
{
	size_t bytes;

	if (ndim < min_ndim || ndim > EACHOBS_DLPACK_MAX_NDIM)
		return eachobs__fail(-EINVAL, "eachobs_dlpack: ndim %d of field "
				     "%zu is outside %d..%d", ndim, k,
				     min_ndim, EACHOBS_DLPACK_MAX_NDIM);
	if (!shape_bytes(dtype, ndim, shape, &bytes))
		return eachobs__fail(-EINVAL, "eachobs_dlpack: field %zu has a "
				     "negative size, an overflow, or a dtype "
				     "of %u bits x %u lanes (whole bytes "
				     "needed)", k, dtype.bits, dtype.lanes);
	if (bytes != it->layout.size[k])
		return eachobs__fail(-EINVAL, "eachobs_dlpack: the shape of "
				     "field %zu makes %zu bytes, the field "
				     "has %zu%s", k, bytes, it->layout.size[k],
				     it->layout.n > 1 ? "" : " (obs_size)");
	return 0;
}

/* A lease of nt tensors, its count and arena reference not yet taken. */
static struct lease *lease_alloc(size_t nt)
{
	struct lease *l = calloc(1, sizeof(*l) + nt * sizeof(l->t[0]));

	if (!l)
		eachobs__fail(-ENOMEM, "eachobs_dlpack: out of memory");
	return l;
}

/* Lend the item to l's nt tensors: true on success (else l is freed). */
static int lease_take(eachobs_iter *it, struct lease *l, const void *data,
		      size_t nt, struct eachobs__buf *b)
{
	int rc = eachobs__hold_lend(&it->hold, data, b);

	if (rc < 0) {
		free(l);
		return rc;
	}
	atomic_init(&l->alive, nt);
	l->arena = it->arena;
	l->data = data;
	eachobs__arena_ref(it->arena);
	return 0;
}

static DLManagedTensor *make_tensor(eachobs_iter *it, struct lease *l,
				    size_t k, const struct eachobs__buf *b,
				    DLDataType dtype, int ndim,
				    const int64_t *shape)
{
	struct tensor *t = &l->t[k];
	int lead = it->batchsize ? 1 : 0;

	if (lead)
		t->shape[0] = (int64_t)b->count;
	for (int i = 0; i < ndim; i++)
		t->shape[lead + i] = shape[i];
	t->lease = l;
	t->m.dl_tensor = (DLTensor){
		.data = b->data + it->layout.off[k],
		.device = { kDLCPU, 0 },
		.ndim = ndim + lead,
		.dtype = dtype,
		.shape = t->shape,
		.strides = NULL,
		.byte_offset = 0,
	};
	t->m.manager_ctx = t;
	t->m.deleter = deleter;
	return &t->m;
}

/* The checked specs' tensors, sharing one lease of data: 0, or what
 * lending the item failed with (then nothing is made). */
static int lend(eachobs_iter *it, const void *data,
		const eachobs_dlpack_field *fields, size_t nfields,
		DLManagedTensor **out)
{
	struct eachobs__buf b;
	struct lease *l = lease_alloc(nfields);

	if (!l)
		return -ENOMEM;
	int rc = lease_take(it, l, data, nfields, &b);
	for (size_t k = 0; rc == 0 && k < nfields; k++)
		out[k] = make_tensor(it, l, k, &b, fields[k].dtype,
				     fields[k].ndim, fields[k].shape);
	return rc;
}

int eachobs_dlpack(eachobs_iter *it, const void *data, DLDataType dtype,
		   int ndim, const int64_t *shape, DLManagedTensor **out)
{
	if (out)
		*out = NULL;
	if (!it || !data || !shape || !out)
		return eachobs__fail(-EINVAL, "eachobs_dlpack: %s is NULL",
				     !it ? "it" : !data ? "data"
					 : !shape ? "shape" : "out");
	if (it->layout.n > 1)
		return eachobs__fail(-EINVAL, "eachobs_dlpack: the observations "
				     "have %zu fields: eachobs_dlpack_fields "
				     "makes a tensor of each", it->layout.n);
	int rc = check_field(it, 0, dtype, ndim, shape, 1);
	if (rc < 0)
		return rc;
	eachobs_dlpack_field f = { .dtype = dtype, .ndim = ndim };
	for (int i = 0; i < ndim; i++)
		f.shape[i] = shape[i];
	return lend(it, data, &f, 1, out);
}

int eachobs_dlpack_fields(eachobs_iter *it, const void *data,
			  const eachobs_dlpack_field *fields, size_t nfields,
			  DLManagedTensor **out)
{
	int rc = 0;

	if (!it || !data || !fields || !out)
		return eachobs__fail(-EINVAL, "eachobs_dlpack_fields: %s is NULL",
				     !it ? "it" : !data ? "data"
					 : !fields ? "fields" : "out");
	for (size_t k = 0; k < nfields; k++)
		out[k] = NULL;
	if (nfields != it->layout.n)
		return eachobs__fail(-EINVAL, "eachobs_dlpack_fields: nfields "
				     "%zu, the observations have %zu",
				     nfields, it->layout.n);
	for (size_t k = 0; rc == 0 && k < nfields; k++)
		rc = check_field(it, k, fields[k].dtype, fields[k].ndim,
				 fields[k].shape, 0);
	return rc < 0 ? rc : lend(it, data, fields, nfields, out);
}
