/*
 * The fields' arrays in a unit buffer (layout.h). Each array is rounded
 * up to a cache line so that the next starts aligned; the whole buffer
 * is at least one line even when every field is empty, so that every unit
 * has a data pointer of its own (eachobs_release finds a held item by it).
 */
#include "layout.h"
#include "error.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

static const size_t line = EACHOBS__CACHELINE;

/* size rounded up to a cache line, or SIZE_MAX when that overflows. */
static size_t round_line(size_t size)
{
	return size > SIZE_MAX - (line - 1) ? SIZE_MAX
					    : (size + line - 1) & ~(line - 1);
}

static int check_fields(size_t obs_size, const size_t *fields,
			size_t nfields)
{
	size_t sum = 0;

	if (!fields && nfields)
		return eachobs__fail(-EINVAL, "fields is NULL with nfields %zu",
				     nfields);
	if (nfields > EACHOBS_MAX_FIELDS)
		return eachobs__fail(-EINVAL, "nfields %zu exceeds "
				     "EACHOBS_MAX_FIELDS (%u)",
				     nfields, EACHOBS_MAX_FIELDS);
	for (size_t k = 0; k < nfields; k++) {
		if (fields[k] > SIZE_MAX - sum)
			return eachobs__fail(-EINVAL, "the sizes in fields "
					     "overflow size_t");
		sum += fields[k];
	}
	if (nfields && sum != obs_size)
		return eachobs__fail(-EINVAL, "fields sum to %zu bytes, "
				     "data->obs_size is %zu", sum, obs_size);
	return 0;
}

int eachobs__layout_init(struct eachobs__layout *l, size_t obs_size,
			 const size_t *fields, size_t nfields, size_t cap)
{
	int rc = check_fields(obs_size, fields, nfields);

	if (rc < 0)
		return rc;
	l->n = nfields ? nfields : 1;
	l->bytes = 0;
	for (size_t k = 0; k < l->n; k++) {
		size_t size = nfields ? fields[k] : obs_size;
		size_t array = size && cap > (SIZE_MAX - line) / size
				       ? SIZE_MAX
				       : round_line(cap * size);
		if (array == SIZE_MAX || array > SIZE_MAX - line - l->bytes)
			return eachobs__fail(-EINVAL,
					     "data->obs_size %zu times batchsize "
					     "%zu overflows size_t",
					     obs_size, cap);
		l->size[k] = size;
		l->off[k] = l->bytes;
		l->bytes += array;
	}
	if (l->bytes == 0)
		l->bytes = line;
	return 0;
}

void eachobs__layout_move(const struct eachobs__layout *l, unsigned char *data,
			  size_t to, size_t from)
{
	for (size_t k = 0; k < l->n; k++)
		memmove(eachobs__layout_at(l, data, k, to),
			eachobs__layout_at(l, data, k, from), l->size[k]);
}
