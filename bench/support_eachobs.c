/*
 * The support library's part that knows eachobs; see support_eachobs.h.
 */
#include "support_eachobs.h"
#include "support.h"

#include <stdint.h>
#include <string.h>

const char *executor_name(eachobs_executor ex)
{
	switch (ex) {
	case EACHOBS_THREADED:
		return "threaded";
	case EACHOBS_BACKGROUND:
		return "background";
	case EACHOBS_SERIAL:
		return "serial";
	}
	return "?";
}

void consume(eachobs_iter *it, size_t n, bool ordered, unsigned char *seen)
{
	const void *obs;
	/* SIZE_MAX until a call sets it: eachobs_next leaves idx untouched
	 * on errors that are not a getobs failure. */
	size_t idx = SIZE_MAX, count = 0, stored;
	char why[128];
	int rc;

	while ((rc = eachobs_next(it, &obs, &idx)) == 1) {
		if (!check_index(seen, n, ordered, count, idx, why,
				 sizeof(why)))
			die("%s", why);
		if (obs == NULL)
			die("index %zu yielded with a NULL slot", idx);
		memcpy(&stored, obs, sizeof(stored));
		if (stored != idx)
			die("index %zu yielded, but its slot holds %zu", idx,
			    stored);
		count++;
	}
	if (rc < 0)
		die("eachobs_next (index %zu): %s", idx, eachobs_strerror(rc));
	if (count != n)
		die("eachobs_next ended after %zu of %zu observations", count,
		    n);
}
