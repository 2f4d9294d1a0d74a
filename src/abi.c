/*
 * What keeps programs built against another 0.x header working with this
 * library: the options and stats structs passed with their size, the 0.1
 * entry points that passed none, and the version.
 *
 * The structs only ever grow at the end, and a field's zero means what the
 * library did before the field existed. So a caller's struct may be
 * shorter than ours (an older header: the fields it lacks are zero) or
 * longer (a newer header: the fields we lack must be zero, else -E2BIG, as
 * the kernel's openat2 does, so that nothing a program asks for is ignored
 * without a word). Stats go the other way: we write the caller's size,
 * zero for the figures we do not count.
 */
#include "internal.h"

#include <errno.h>
#include <string.h>

#define STR(x) #x
#define XSTR(x) STR(x)

_Static_assert(EACHOBS__OPTIONS_SIZE_0_1 <= sizeof(eachobs_options) &&
		       EACHOBS__STATS_SIZE_0_1 <= sizeof(eachobs_stats),
	       "the structs only grow");

/*
 * A field that a later version appends must start at or after this
 * version's sizeof(eachobs_options): one placed in our trailing padding
 * would be copied in and ignored, without -E2BIG. So eachobs_options has
 * no trailing padding; when an appended field would leave some, name it
 * (a reserved member that start requires to be zero) and move this check
 * to the new last field.
 */
_Static_assert(sizeof(eachobs_options) ==
		       offsetof(eachobs_options, shuffle_buffer) + sizeof(size_t),
	       "eachobs_options ends in padding: name it (see above)");

static size_t min_size(size_t a, size_t b)
{
	return a < b ? a : b;
}

/* The offset of the first byte in [from, to) that is not zero, or to. */
static size_t nonzero_from(const void *p, size_t from, size_t to)
{
	const unsigned char *b = p;

	for (size_t i = from; i < to; i++)
		if (b[i])
			return i;
	return to;
}

/* The caller's options of opts_size bytes in *o, this library's size:
 * 0, or -EINVAL / -E2BIG (fn reports it) with *itp NULL. */
static int take_options(eachobs_iter **itp, const eachobs_options *opts,
			size_t opts_size, const char *fn, eachobs_options *o)
{
	size_t set;
	int rc = 0;

	memset(o, 0, sizeof(*o));
	if (opts && opts_size < EACHOBS__OPTIONS_SIZE_0_1)
		rc = eachobs__fail(-EINVAL,
				   "%s: opts_size %zu is below the 0.1 options "
				   "size (%zu)",
				   fn, opts_size,
				   (size_t)EACHOBS__OPTIONS_SIZE_0_1);
	else if (opts && (set = nonzero_from(opts, sizeof(*o), opts_size)) <
				 opts_size)
		rc = eachobs__fail(-E2BIG,
				   "%s: opts_size %zu exceeds this library's "
				   "options (%zu bytes) and byte %zu is not "
				   "zero: the program sets an option that "
				   "eachobs %s does not have",
				   fn, opts_size, sizeof(*o), set,
				   eachobs_version_string());
	if (rc < 0) {
		if (itp)
			*itp = NULL;
		return rc;
	}
	if (opts)
		memcpy(o, opts, min_size(opts_size, sizeof(*o)));
	return 0;
}

int eachobs_stream_parallel_sized(eachobs_iter **itp, const eachobs_stream *s,
				  const eachobs_options *opts, size_t opts_size)
{
	eachobs_options o;
	int rc = take_options(itp, opts, opts_size,
			      "eachobs_stream_parallel_sized", &o);

	return rc < 0 ? rc : eachobs__stream_parallel(itp, s, &o);
}

int eachobs_parallel_sized(eachobs_iter **itp, const eachobs_dataset *data,
			   const eachobs_options *opts, size_t opts_size)
{
	eachobs_options o;
	int rc = take_options(itp, opts, opts_size, "eachobs_parallel_sized",
			      &o);

	return rc < 0 ? rc : eachobs__parallel(itp, data, &o);
}

int eachobs_get_stats_sized(const eachobs_iter *it, eachobs_stats *st,
			    size_t size)
{
	eachobs_stats s;

	if (!it)
		return eachobs__fail(-EINVAL, "eachobs_get_stats: it is NULL");
	if (!st)
		return eachobs__fail(-EINVAL, "eachobs_get_stats: st is NULL");
	if (size < EACHOBS__STATS_SIZE_0_1)
		return eachobs__fail(-EINVAL,
				     "eachobs_get_stats_sized: size %zu is "
				     "below the 0.1 stats size (%zu)",
				     size, (size_t)EACHOBS__STATS_SIZE_0_1);
	eachobs__get_stats(it, &s);
	memcpy(st, &s, min_size(size, sizeof(s)));
	if (size > sizeof(s))
		memset((unsigned char *)st + sizeof(s), 0, size - sizeof(s));
	return 0;
}

/*
 * The 0.1 entry points, still exported: a binary built against the 0.1
 * header calls them with structs of the 0.1 size. Programs built against
 * this header call the _sized functions through inline wrappers instead.
 */
int eachobs_parallel(eachobs_iter **itp, const eachobs_dataset *data,
		     const eachobs_options *opts)
{
	return eachobs_parallel_sized(itp, data, opts,
				      EACHOBS__OPTIONS_SIZE_0_1);
}

int eachobs_get_stats(const eachobs_iter *it, eachobs_stats *st)
{
	return eachobs_get_stats_sized(it, st, EACHOBS__STATS_SIZE_0_1);
}

unsigned eachobs_version(void)
{
	return EACHOBS_VERSION_HEX;
}

const char *eachobs_version_string(void)
{
	return XSTR(EACHOBS_VERSION_MAJOR) "." XSTR(EACHOBS_VERSION_MINOR) "."
		XSTR(EACHOBS_VERSION_PATCH);
}
