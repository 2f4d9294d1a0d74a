/*
 * Where the fields of a unit's observations lie in its buffer: one array
 * per field (eachobs_options.fields), each starting on a cache line, so
 * that field k of a batch is one contiguous array a framework can take as
 * a tensor. Without fields, one field of obs_size bytes: the buffer is the
 * observations back to back, as it always was.
 */
#ifndef EACHOBS_LAYOUT_H
#define EACHOBS_LAYOUT_H

#include "base.h"
#include "eachobs.h"

struct eachobs__layout {
	size_t n;                        /* fields, at least 1 */
	size_t size[EACHOBS_MAX_FIELDS]; /* bytes of one observation's field */
	size_t off[EACHOBS_MAX_FIELDS];  /* where the field's array starts */
	size_t bytes; /* one unit's buffer: a multiple of 64, at least 64 */
};

/* Lay out units of cap observations of obs_size bytes, made of nfields
 * fields (0: one). 0, or -EINVAL (with its message) when the fields do
 * not describe obs_size bytes or the sizes overflow. */
int eachobs__layout_init(struct eachobs__layout *l, size_t obs_size,
			 const size_t *fields, size_t nfields, size_t cap);

/* Field k of entry e in the unit buffer data. */
static inline unsigned char *eachobs__layout_at(const struct eachobs__layout *l,
						unsigned char *data, size_t k,
						size_t e)
{
	return data + l->off[k] + e * l->size[k];
}

/* Move entry `from`'s fields over entry `to`'s (to < from). */
void eachobs__layout_move(const struct eachobs__layout *l, unsigned char *data,
			  size_t to, size_t from);

#endif /* EACHOBS_LAYOUT_H */
