/*
 * Versions and the binary interface, seen from a program built against the
 * current header: options and stats passed with their size. The other side,
 * a program built against the 0.1.0 header, is test/abi_old_binary.c.
 *
 * PROJECT_VERSION is meson's project version, passed by test/meson.build,
 * so that the header's hand-written macros cannot drift from it.
 */
#define _GNU_SOURCE
#include "api_helpers.h"
#include "internal.h"

#include <limits.h>

TestSuite(version, .init = deadline, .timeout = 60);
TestSuite(abi, .init = deadline, .timeout = 60);

/* ---- the 0.1.0 layouts ---------------------------------------------- */

/*
 * eachobs_options and eachobs_stats as test/abi/eachobs-0.1.h declares
 * them, field for field. The library's 0.1 sizes must be theirs, and every
 * 0.1 field must keep its offset in the current structs (fields are only
 * appended).
 */
struct options_0_1 {
	unsigned nthreads;
	size_t basesize;
	unsigned oversubscription;
	size_t buffersize;
	eachobs_executor executor;
	bool ordered;
	size_t stack_size;
	eachobs_on_error on_error;
	const unsigned *worker_cpus;
	unsigned nworker_cpus;
	int worker_nice;
	size_t batchsize;
	bool drop_last;
	unsigned hold;
	eachobs_pool *pool;
	const size_t *indices;
	size_t nindices;
	bool shuffle;
	unsigned long long seed;
	unsigned long long epoch;
	unsigned shard_index;
	unsigned shard_count;
};

struct stats_0_1 {
	unsigned long long yielded;
	unsigned long long batches;
	unsigned long long skipped;
	unsigned long long loaded;
	unsigned long long loaded_by_consumer;
	unsigned long long consumer_wait_ns;
	unsigned long long consumer_getobs_ns;
	unsigned long long worker_getobs_ns;
	unsigned long long worker_idle_ns;
	unsigned long long steals;
	size_t max_waiting;
	unsigned nworkers;
};

_Static_assert(sizeof(struct options_0_1) == EACHOBS__OPTIONS_SIZE_0_1,
	       "the library's 0.1 options size is not the 0.1 layout's");
_Static_assert(sizeof(struct stats_0_1) == EACHOBS__STATS_SIZE_0_1,
	       "the library's 0.1 stats size is not the 0.1 layout's");

#define SAME_PLACE(old, new, f)                                             \
	_Static_assert(offsetof(old, f) == offsetof(new, f) &&              \
			       sizeof(((old *)0)->f) == sizeof(((new *)0)->f), \
		       #f " moved or changed size since 0.1")
#define SAME_OPTION(f) SAME_PLACE(struct options_0_1, eachobs_options, f)
#define SAME_STAT(f) SAME_PLACE(struct stats_0_1, eachobs_stats, f)

SAME_OPTION(nthreads);
SAME_OPTION(basesize);
SAME_OPTION(oversubscription);
SAME_OPTION(buffersize);
SAME_OPTION(executor);
SAME_OPTION(ordered);
SAME_OPTION(stack_size);
SAME_OPTION(on_error);
SAME_OPTION(worker_cpus);
SAME_OPTION(nworker_cpus);
SAME_OPTION(worker_nice);
SAME_OPTION(batchsize);
SAME_OPTION(drop_last);
SAME_OPTION(hold);
SAME_OPTION(pool);
SAME_OPTION(indices);
SAME_OPTION(nindices);
SAME_OPTION(shuffle);
SAME_OPTION(seed);
SAME_OPTION(epoch);
SAME_OPTION(shard_index);
SAME_OPTION(shard_count);

SAME_STAT(yielded);
SAME_STAT(batches);
SAME_STAT(skipped);
SAME_STAT(loaded);
SAME_STAT(loaded_by_consumer);
SAME_STAT(consumer_wait_ns);
SAME_STAT(consumer_getobs_ns);
SAME_STAT(worker_getobs_ns);
SAME_STAT(worker_idle_ns);
SAME_STAT(steals);
SAME_STAT(max_waiting);
SAME_STAT(nworkers);

/* ---- versions ------------------------------------------------------- */

Test(version, macros_match_the_project_version)
{
	char v[64];

	snprintf(v, sizeof(v), "%d.%d.%d", EACHOBS_VERSION_MAJOR,
		 EACHOBS_VERSION_MINOR, EACHOBS_VERSION_PATCH);
	cr_assert_str_eq(v, PROJECT_VERSION, "eachobs.h says %s, meson.build "
			 "says %s: update the header's version macros", v,
			 PROJECT_VERSION);
}

Test(version, hex_is_major_minor_patch)
{
	cr_assert_eq(EACHOBS_VERSION_HEX,
		     (EACHOBS_VERSION_MAJOR << 16) |
			     (EACHOBS_VERSION_MINOR << 8) |
			     EACHOBS_VERSION_PATCH);
}

Test(version, library_reports_the_header_it_was_built_with)
{
	cr_assert_eq(eachobs_version(), (unsigned)EACHOBS_VERSION_HEX,
		     "eachobs_version() = %#x, EACHOBS_VERSION_HEX = %#x",
		     eachobs_version(), (unsigned)EACHOBS_VERSION_HEX);
}

Test(version, string_is_the_project_version)
{
	cr_assert_not_null(eachobs_version_string());
	cr_assert_str_eq(eachobs_version_string(), PROJECT_VERSION);
}

/* ---- eachobs_parallel_sized ----------------------------------------- */

/* Options as a newer header might declare them: ours, then fields this
 * library does not know. */
struct newer_options {
	eachobs_options o;
	unsigned long long later[4];
};

enum { N = 300 };

/* Start with opts_size, drain, and check every index once, in order when
 * asked. */
static void iterate_sized(const eachobs_options *o, size_t opts_size,
			  const char *label)
{
	struct td td;
	eachobs_dataset data;
	eachobs_iter *it = NULL;
	struct cons c;
	int rc;

	td_init(&td, N, 8, N);
	data = td_dataset(&td);
	rc = eachobs_parallel_sized(&it, &data, o, opts_size);
	cr_assert_eq(rc, 0, "%s: eachobs_parallel_sized returned %d (%s)", label,
		     rc, eachobs_strerror(rc));
	cons_init(&c, it, &td, o && o->ordered);
	rc = drain(&c, SIZE_MAX, label);
	cr_assert_eq(rc, 0, "%s: eachobs_next returned %d", label, rc);
	cr_assert_eq(c.yielded, (size_t)N, "%s: %zu yielded", label, c.yielded);
	cr_assert(cons_all_seen(&c), "%s: an index was never yielded", label);
	finish(&c, label);
	td_fini(&td);
}

/* Start must fail with want before calling anything: no numobs, no
 * getobs, *it NULL, nothing allocated. */
static void expect_refused(const eachobs_options *o, size_t opts_size,
			   int want, const char *label)
{
	struct td td;
	eachobs_dataset data;
	eachobs_iter *it = (eachobs_iter *)(uintptr_t)0x1;
	int rc;

	td_init(&td, N, 8, N);
	data = td_dataset(&td);
	rc = eachobs_parallel_sized(&it, &data, o, opts_size);
	cr_assert_eq(rc, want, "%s: eachobs_parallel_sized returned %d (%s), "
		     "not %d (%s)", label, rc, eachobs_strerror(rc), want,
		     eachobs_strerror(want));
	cr_assert_null(it, "%s: *it not set to NULL on failure", label);
	cr_assert_eq(atomic_load(&td.numobs_calls), 0, "%s: numobs ran", label);
	cr_assert_eq(atomic_load(&td.getobs_calls), 0, "%s: getobs ran", label);
	cr_assert_eq(eachobs__alloc_live(), 0, "%s: %ld allocations left",
		     label, eachobs__alloc_live());
	td_fini(&td);
}

Test(abi, larger_options_with_a_zero_tail_work)
{
	struct newer_options big = { .o = { .nthreads = 3, .ordered = true,
					    .buffersize = 5 } };

	iterate_sized(&big.o, sizeof(big), "newer options, zero tail");
}

Test(abi, a_non_zero_byte_past_the_known_options_gives_e2big)
{
	struct newer_options big = { .o = { .nthreads = 2 } };
	unsigned char *tail = (unsigned char *)&big + sizeof(eachobs_options);
	char label[64];

	for (size_t i = 0; i < sizeof(big) - sizeof(eachobs_options); i++) {
		tail[i] = 1;
		snprintf(label, sizeof(label), "tail byte %zu set", i);
		expect_refused(&big.o, sizeof(big), -E2BIG, label);
		tail[i] = 0;
	}
	iterate_sized(&big.o, sizeof(big), "tail cleared again");
}

Test(abi, options_smaller_than_0_1_give_einval)
{
	eachobs_options o = { .nthreads = 2 };

	expect_refused(&o, EACHOBS__OPTIONS_SIZE_0_1 - 1, -EINVAL,
		       "one byte short of 0.1");
	expect_refused(&o, offsetof(eachobs_options, shard_count), -EINVAL,
		       "without shard_count");
	expect_refused(&o, 0, -EINVAL, "size 0");
}

Test(abi, the_0_1_size_is_accepted)
{
	struct options_0_1 old = { .nthreads = 2, .ordered = true };

	iterate_sized((const eachobs_options *)(void *)&old, sizeof(old),
		      "0.1 options");
}

Test(abi, bytes_past_opts_size_are_not_read)
{
	/* Junk after the struct, outside opts_size: a library that looked
	 * past opts_size would see it as options it does not know. */
	struct newer_options big = { .o = { .nthreads = 2 } };

	memset(big.later, 0xff, sizeof(big.later));
	iterate_sized(&big.o, sizeof(eachobs_options), "junk past opts_size");
}

Test(abi, null_options_mean_defaults_whatever_the_size)
{
	size_t sizes[] = { 0, 1, sizeof(eachobs_options),
			   sizeof(struct newer_options), SIZE_MAX };
	char label[64];

	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		snprintf(label, sizeof(label), "NULL options, size %zu",
			 sizes[k]);
		iterate_sized(NULL, sizes[k], label);
	}
}

Test(abi, size_errors_need_an_iterator_pointer_too)
{
	eachobs_options o = { 0 };
	struct td td;
	eachobs_dataset data;

	td_init(&td, N, 8, N);
	data = td_dataset(&td);
	cr_assert_eq(eachobs_parallel_sized(NULL, &data, &o, 1), -EINVAL);
	cr_assert_eq(eachobs_parallel_sized(NULL, &data, NULL, 0), -EINVAL);
	cr_assert_eq(atomic_load(&td.numobs_calls), 0);
	td_fini(&td);
}

Test(abi, strerror_names_e2big)
{
	int others[] = { -EINVAL, -ENOMEM, -EAGAIN, -ERANGE, -ENOBUFS };
	const char *s = eachobs_strerror(-E2BIG);

	cr_assert_str_neq(s, eachobs_strerror(-123456), "generic message");
	for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++)
		cr_assert_str_neq(s, eachobs_strerror(others[i]));
}

/* ---- eachobs_get_stats_sized ---------------------------------------- */

#define PAD 0xa5
enum { CANARY = 64 };

/* Stats as a newer header might declare them, and bytes after them. */
struct stats_buf {
	eachobs_stats st;
	unsigned char later[32];
	unsigned char canary[CANARY];
};

/* An iterator over N observations, drained; the caller closes it. */
static eachobs_iter *drained(struct td *td)
{
	eachobs_options o = { .nthreads = 2 };
	eachobs_dataset data;
	eachobs_iter *it = NULL;
	const void *obs;
	int rc;

	td_init(td, N, 8, N);
	data = td_dataset(td);
	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
	while ((rc = eachobs_next(it, &obs, NULL)) == 1)
		;
	cr_assert_eq(rc, 0);
	return it;
}

/* Bytes [from, to) of buf are still PAD. */
static void expect_untouched(const void *buf, size_t from, size_t to,
			     const char *label)
{
	const unsigned char *b = buf;

	for (size_t i = from; i < to; i++)
		cr_assert_eq(b[i], PAD, "%s: byte %zu written (size %zu)",
			     label, i, from);
}

Test(abi, stats_of_the_0_1_size_write_exactly_that)
{
	struct td td;
	eachobs_iter *it = drained(&td);
	struct stats_buf b;

	memset(&b, PAD, sizeof(b));
	cr_assert_eq(eachobs_get_stats_sized(it, &b.st, EACHOBS__STATS_SIZE_0_1),
		     0);
	expect_untouched(&b, EACHOBS__STATS_SIZE_0_1, sizeof(b), "0.1 size");
	cr_assert_eq(b.st.yielded, (unsigned long long)N);
	cr_assert_eq(b.st.loaded, (unsigned long long)N);
	cr_assert(b.st.nworkers >= 1 && b.st.nworkers <= 2, "nworkers %u",
		  b.st.nworkers);
	eachobs_close(it);
	td_fini(&td);
}

Test(abi, stats_a_library_does_not_count_read_zero)
{
	struct td td;
	eachobs_iter *it = drained(&td);
	struct stats_buf b;
	const size_t size = offsetof(struct stats_buf, canary);

	memset(&b, PAD, sizeof(b));
	cr_assert_eq(eachobs_get_stats_sized(it, &b.st, size), 0);
	for (size_t i = 0; i < sizeof(b.later); i++)
		cr_assert_eq(b.later[i], 0, "later byte %zu is %#x, not 0", i,
			     b.later[i]);
	expect_untouched(&b, size, sizeof(b), "newer size");
	cr_assert_eq(b.st.yielded, (unsigned long long)N);
	eachobs_close(it);
	td_fini(&td);
}

Test(abi, stats_smaller_than_0_1_give_einval_and_write_nothing)
{
	struct td td;
	eachobs_iter *it = drained(&td);
	struct stats_buf b;

	memset(&b, PAD, sizeof(b));
	cr_assert_eq(eachobs_get_stats_sized(it, &b.st,
					     EACHOBS__STATS_SIZE_0_1 - 1),
		     -EINVAL);
	cr_assert_eq(eachobs_get_stats_sized(it, &b.st, 0), -EINVAL);
	expect_untouched(&b, 0, sizeof(b), "too small");
	cr_assert_eq(eachobs_get_stats_sized(NULL, &b.st, sizeof(b.st)),
		     -EINVAL);
	cr_assert_eq(eachobs_get_stats_sized(it, NULL, sizeof(b.st)), -EINVAL);
	expect_untouched(&b, 0, sizeof(b), "NULL arguments");
	eachobs_close(it);
	td_fini(&td);
}

Test(abi, get_stats_passes_this_headers_size)
{
	struct td td;
	eachobs_iter *it = drained(&td);
	struct stats_buf b;

	memset(&b, PAD, sizeof(b));
	cr_assert_eq(eachobs_get_stats(it, &b.st), 0);
	expect_untouched(&b, sizeof(eachobs_stats), sizeof(b), "inline");
	cr_assert_eq(b.st.yielded, (unsigned long long)N);
	eachobs_close(it);
	td_fini(&td);
}
