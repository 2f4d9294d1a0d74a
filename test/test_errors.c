/*
 * eachobs_last_error: every failing call of the public API keeps its code
 * and says in words what was wrong, naming the argument and the offending
 * value; successes leave the message alone; each thread has its own.
 *
 * The failures are one table (struct fail_case): each case makes one call
 * fail and names the code it must return and the words its message must
 * contain. One test checks every case's code and words, another their
 * style, and prints every message once, so that they can be read
 * together (meson-logs/testlog.txt, or run test_errors directly).
 * -ENOMEM and -EAGAIN come from the fault injection hooks (src/fault.h).
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include "eachobs.h"
#include "fault.h"
#include "helpers.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

TestSuite(errors, .init = deadline, .timeout = 60);

/* ---- a small dataset ----------------------------------------------- */

struct ds {
	size_t n;
	size_t fail_idx; /* SIZE_MAX: none */
	int fail_code;   /* what getobs(fail_idx) returns */
	/* Inside getobs: call eachobs_set_length(set_len) when set_len_call,
	 * and keep what it returned and the message it left. */
	bool set_len_call;
	size_t set_len;
	int set_len_rc;
	char set_len_msg[256];
};

static size_t ds_numobs(void *ctx)
{
	return ((struct ds *)ctx)->n;
}

static int ds_getobs(void *ctx, size_t idx, void *obs)
{
	struct ds *d = ctx;

	(void)obs;
	if (d->set_len_call && idx == 0) {
		d->set_len_rc = eachobs_set_length(d->set_len);
		snprintf(d->set_len_msg, sizeof(d->set_len_msg), "%s",
			 eachobs_last_error());
	}
	return idx == d->fail_idx ? d->fail_code : 0;
}

static struct ds ds_make(size_t n)
{
	return (struct ds){ .n = n, .fail_idx = SIZE_MAX };
}

static eachobs_dataset ds_data(struct ds *d, size_t obs_size)
{
	return (eachobs_dataset){ .ctx = d, .numobs = ds_numobs,
				  .getobs = ds_getobs, .obs_size = obs_size };
}

/* Start with options o over n observations of 8 bytes; must succeed. */
static eachobs_iter *open_iter(struct ds *d, size_t n, eachobs_options o)
{
	eachobs_iter *it;

	*d = ds_make(n);
	eachobs_dataset data = ds_data(d, 8);
	int rc = eachobs_parallel(&it, &data, &o);
	cr_assert_eq(rc, 0, "setup: eachobs_parallel returned %d (%s)", rc,
		     eachobs_last_error());
	return it;
}

/* eachobs_parallel over 100 observations of obs_size bytes with o. */
static int start_with(eachobs_options o, size_t obs_size)
{
	struct ds d = ds_make(100);
	eachobs_dataset data = ds_data(&d, obs_size);
	eachobs_iter *it = (eachobs_iter *)(uintptr_t)1;
	int rc = eachobs_parallel(&it, &data, &o);

	cr_assert_null(it, "*it not NULL after a failed start");
	return rc;
}

/* ---- eachobs_parallel: one case per -EINVAL of its return list ------ */

static int p_it_null(char *dyn)
{
	struct ds d = ds_make(10);
	eachobs_dataset data = ds_data(&d, 8);

	(void)dyn;
	return eachobs_parallel(NULL, &data, NULL);
}

static int p_data_null(char *dyn)
{
	eachobs_iter *it;

	(void)dyn;
	return eachobs_parallel(&it, NULL, NULL);
}

static int p_numobs_null(char *dyn)
{
	struct ds d = ds_make(10);
	eachobs_dataset data = ds_data(&d, 8);
	eachobs_iter *it;

	(void)dyn;
	data.numobs = NULL;
	return eachobs_parallel(&it, &data, NULL);
}

static int p_getobs_null(char *dyn)
{
	struct ds d = ds_make(10);
	eachobs_dataset data = ds_data(&d, 8);
	eachobs_iter *it;

	(void)dyn;
	data.getobs = NULL;
	return eachobs_parallel(&it, &data, NULL);
}

static int p_opts_size(char *dyn)
{
	struct ds d = ds_make(10);
	eachobs_dataset data = ds_data(&d, 8);
	eachobs_options o = { 0 };
	eachobs_iter *it;

	(void)dyn;
	return eachobs_parallel_sized(&it, &data, &o, 12);
}

static int p_executor(char *dyn)
{
	(void)dyn;
	return start_with((eachobs_options){ .executor = (eachobs_executor)7 },
			  8);
}

static int p_on_error(char *dyn)
{
	(void)dyn;
	return start_with((eachobs_options){ .on_error = (eachobs_on_error)5 },
			  8);
}

static int p_nthreads(char *dyn)
{
	(void)dyn;
	return start_with((eachobs_options){ .nthreads = 100000 }, 8);
}

static int p_stack_size(char *dyn)
{
	snprintf(dyn, 64, "%zu", (size_t)PTHREAD_STACK_MIN);
	return start_with((eachobs_options){ .stack_size = 100 }, 8);
}

static int p_nice_low(char *dyn)
{
	(void)dyn;
	return start_with((eachobs_options){ .worker_nice = -5 }, 8);
}

static int p_nice_high(char *dyn)
{
	(void)dyn;
	return start_with((eachobs_options){ .worker_nice = 20 }, 8);
}

static int p_cpu_range(char *dyn)
{
	static const unsigned cpus[] = { 0, 5000 };

	(void)dyn;
	return start_with((eachobs_options){ .worker_cpus = cpus,
					     .nworker_cpus = 2 },
			  8);
}

static int p_cpus_null(char *dyn)
{
	(void)dyn;
	return start_with((eachobs_options){ .nworker_cpus = 3 }, 8);
}

static int p_batchsize(char *dyn)
{
	(void)dyn;
	return start_with((eachobs_options){ .batchsize =
						     EACHOBS_MAX_BATCHSIZE + 1 },
			  8);
}

static int p_hold(char *dyn)
{
	(void)dyn;
	return start_with((eachobs_options){ .hold = EACHOBS_MAX_SLOTS + 1 },
			  8);
}

static int p_index(char *dyn)
{
	static const size_t idx[] = { 0, 1, 150, 2 };

	(void)dyn;
	return start_with((eachobs_options){ .indices = idx, .nindices = 4 },
			  8);
}

static int p_indices_null(char *dyn)
{
	(void)dyn;
	return start_with((eachobs_options){ .nindices = 5 }, 8);
}

static int p_shard(char *dyn)
{
	(void)dyn;
	return start_with((eachobs_options){ .shard_index = 4,
					     .shard_count = 4 },
			  8);
}

static int p_buffersize(char *dyn)
{
	(void)dyn;
	return start_with((eachobs_options){ .buffersize =
						     (size_t)EACHOBS_MAX_SLOTS +
						     1 },
			  8);
}

static int p_slot_count(char *dyn)
{
	(void)dyn;
	return start_with((eachobs_options){ .buffersize = EACHOBS_MAX_SLOTS,
					     .nthreads = 4 },
			  8);
}

static int p_obs_size_batch(char *dyn)
{
	(void)dyn;
	return start_with((eachobs_options){ .batchsize = 64 }, SIZE_MAX);
}

static int p_slot_memory(char *dyn)
{
	(void)dyn;
	return start_with((eachobs_options){ .buffersize = 4, .nthreads = 2 },
			  SIZE_MAX / 2);
}

static int p_serial_memory(char *dyn)
{
	(void)dyn;
	return start_with((eachobs_options){ .executor = EACHOBS_SERIAL,
					     .hold = 3 },
			  SIZE_MAX / 2);
}

/* A program built against a newer header sets an option at byte 200. */
static int p_e2big(char *dyn)
{
	struct ds d = ds_make(10);
	eachobs_dataset data = ds_data(&d, 8);
	union {
		eachobs_options o;
		unsigned char bytes[sizeof(eachobs_options) + 64];
	} big;
	eachobs_iter *it = (eachobs_iter *)(uintptr_t)1;

	memset(&big, 0, sizeof(big));
	big.bytes[sizeof(eachobs_options) + 7] = 1;
	snprintf(dyn, 64, "byte %zu", sizeof(eachobs_options) + 7);
	int rc = eachobs_parallel_sized(&it, &data, &big.o, sizeof(big));
	cr_assert_null(it);
	return rc;
}

/* ---- start: -ENOMEM, -EAGAIN ---------------------------------------- */

static int p_enomem(char *dyn)
{
	(void)dyn;
	eachobs__fault_alloc_after(0);
	int rc = start_with((eachobs_options){ .nthreads = 2 }, 8);
	eachobs__fault_alloc_after(-1);
	return rc;
}

static int p_eagain(char *dyn)
{
	(void)dyn;
	eachobs__fault_thread_after(1);
	int rc = start_with((eachobs_options){ .nthreads = 4,
					       .executor = EACHOBS_BACKGROUND },
			    8);
	eachobs__fault_thread_after(-1);
	return rc;
}

/* A CPU no machine running the tests has (as test_placement.c). */
static int p_cpu_unusable(char *dyn)
{
	static const unsigned cpus[] = { EACHOBS_MAX_CPU - 1 };

	snprintf(dyn, 64, "worker_cpus[0] = %u", EACHOBS_MAX_CPU - 1);
	return start_with((eachobs_options){ .worker_cpus = cpus,
					     .nworker_cpus = 1, .nthreads = 2,
					     .executor = EACHOBS_BACKGROUND },
			  8);
}

static int p_cpus_unusable(char *dyn)
{
	static const unsigned cpus[] = { EACHOBS_MAX_CPU - 1,
					 EACHOBS_MAX_CPU - 2,
					 EACHOBS_MAX_CPU - 1 };

	snprintf(dyn, 64, "%u, %u", EACHOBS_MAX_CPU - 2, EACHOBS_MAX_CPU - 1);
	return start_with((eachobs_options){ .worker_cpus = cpus,
					     .nworker_cpus = 3, .nthreads = 2,
					     .executor = EACHOBS_BACKGROUND },
			  8);
}

/* ---- pools ----------------------------------------------------------- */

static int pool_null(char *dyn)
{
	(void)dyn;
	return eachobs_pool_create(NULL, 2);
}

static int pool_zero(char *dyn)
{
	eachobs_pool *p;

	(void)dyn;
	return eachobs_pool_create(&p, 0);
}

static int pool_many(char *dyn)
{
	eachobs_pool *p;

	(void)dyn;
	return eachobs_pool_create(&p, 5000);
}

static int pool_enomem(char *dyn)
{
	eachobs_pool *p;

	(void)dyn;
	eachobs__fault_alloc_after(1);
	int rc = eachobs_pool_create(&p, 3);
	eachobs__fault_alloc_after(-1);
	cr_assert_null(p);
	return rc;
}

static int pool_eagain(char *dyn)
{
	eachobs_pool *p;

	(void)dyn;
	eachobs__fault_thread_after(2);
	int rc = eachobs_pool_create(&p, 3);
	eachobs__fault_thread_after(-1);
	cr_assert_null(p);
	return rc;
}

/* ---- eachobs_next, eachobs_next_batch -------------------------------- */

static int next_null(char *dyn)
{
	(void)dyn;
	return eachobs_next(NULL, NULL, NULL);
}

static int next_batched(char *dyn)
{
	struct ds d;
	eachobs_iter *it = open_iter(&d, 10, (eachobs_options){ .batchsize = 64 });

	(void)dyn;
	int rc = eachobs_next(it, NULL, NULL);
	eachobs_close(it);
	return rc;
}

static int batch_null(char *dyn)
{
	struct ds d;
	eachobs_iter *it = open_iter(&d, 10, (eachobs_options){ .batchsize = 4 });

	(void)dyn;
	int rc = eachobs_next_batch(it, NULL);
	eachobs_close(it);
	return rc;
}

static int batch_it_null(char *dyn)
{
	eachobs_batch b;

	(void)dyn;
	return eachobs_next_batch(NULL, &b);
}

static int batch_unbatched(char *dyn)
{
	struct ds d;
	eachobs_iter *it = open_iter(&d, 10, (eachobs_options){ 0 });
	eachobs_batch b;

	(void)dyn;
	int rc = eachobs_next_batch(it, &b);
	eachobs_close(it);
	return rc;
}

/* Iterate until eachobs_next fails; getobs(17) returns code. */
static int next_until_failure(eachobs_options o, int code)
{
	struct ds d = ds_make(40);
	eachobs_dataset data = ds_data(&d, 8);
	eachobs_iter *it;
	size_t idx = SIZE_MAX;
	int rc;

	d.fail_idx = 17;
	d.fail_code = code;
	o.ordered = true;
	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
	while ((rc = eachobs_next(it, NULL, &idx)) == 1)
		;
	cr_assert_eq(idx, 17, "failed at %zu", idx);
	eachobs_close(it);
	return rc;
}

static int next_getobs(char *dyn)
{
	(void)dyn;
	return next_until_failure((eachobs_options){ .executor =
							     EACHOBS_BACKGROUND,
						     .nthreads = 2 },
				  -EBADMSG);
}

static int next_getobs_positive(char *dyn)
{
	(void)dyn;
	return next_until_failure((eachobs_options){ .executor =
							     EACHOBS_SERIAL },
				  5);
}

static int next_getobs_unknown(char *dyn)
{
	(void)dyn;
	return next_until_failure((eachobs_options){ .executor =
							     EACHOBS_THREADED,
						     .nthreads = 2 },
				  -5000);
}

static int batch_getobs(char *dyn)
{
	struct ds d = ds_make(40);
	eachobs_dataset data = ds_data(&d, 8);
	eachobs_options o = { .batchsize = 8, .ordered = true, .nthreads = 2 };
	eachobs_iter *it;
	eachobs_batch b;
	int rc;

	(void)dyn;
	d.fail_idx = 21;
	d.fail_code = -EIO;
	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
	while ((rc = eachobs_next_batch(it, &b)) == 1)
		;
	eachobs_close(it);
	return rc;
}

static int next_enobufs(char *dyn)
{
	struct ds d;
	eachobs_iter *it = open_iter(&d, 10, (eachobs_options){ .hold = 2 });

	(void)dyn;
	cr_assert_eq(eachobs_next(it, NULL, NULL), 1);
	cr_assert_eq(eachobs_next(it, NULL, NULL), 1);
	int rc = eachobs_next(it, NULL, NULL);
	eachobs_close(it);
	return rc;
}

static int next_eintr(char *dyn)
{
	struct ds d;
	eachobs_iter *it = open_iter(&d, 10, (eachobs_options){ 0 });

	(void)dyn;
	cr_assert_eq(eachobs_interrupt(it), 0);
	int rc = eachobs_next(it, NULL, NULL);
	eachobs_close(it);
	return rc;
}

/* ---- release, lengths, stats, interrupt ------------------------------- */

static int release_it_null(char *dyn)
{
	int x = 0;

	(void)dyn;
	return eachobs_release(NULL, &x);
}

static int release_data_null(char *dyn)
{
	struct ds d;
	eachobs_iter *it = open_iter(&d, 10, (eachobs_options){ .hold = 2 });

	(void)dyn;
	int rc = eachobs_release(it, NULL);
	eachobs_close(it);
	return rc;
}

static int release_no_hold(char *dyn)
{
	struct ds d;
	eachobs_iter *it = open_iter(&d, 10, (eachobs_options){ 0 });
	const void *obs;

	(void)dyn;
	cr_assert_eq(eachobs_next(it, &obs, NULL), 1);
	int rc = eachobs_release(it, obs);
	eachobs_close(it);
	return rc;
}

static int release_twice(char *dyn)
{
	struct ds d;
	eachobs_iter *it = open_iter(&d, 10, (eachobs_options){ .hold = 2 });
	const void *obs;

	cr_assert_eq(eachobs_next(it, &obs, NULL), 1);
	cr_assert_eq(eachobs_release(it, obs), 0);
	snprintf(dyn, 64, "%p", obs);
	int rc = eachobs_release(it, obs);
	eachobs_close(it);
	return rc;
}

static int length_it_null(char *dyn)
{
	size_t len;
	int x = 0;

	(void)dyn;
	return eachobs_obs_length(NULL, &x, &len);
}

static int length_obs_null(char *dyn)
{
	struct ds d;
	eachobs_iter *it = open_iter(&d, 10, (eachobs_options){ 0 });
	size_t len;

	(void)dyn;
	int rc = eachobs_obs_length(it, NULL, &len);
	eachobs_close(it);
	return rc;
}

static int length_len_null(char *dyn)
{
	struct ds d;
	eachobs_iter *it = open_iter(&d, 10, (eachobs_options){ 0 });
	const void *obs;

	(void)dyn;
	cr_assert_eq(eachobs_next(it, &obs, NULL), 1);
	int rc = eachobs_obs_length(it, obs, NULL);
	eachobs_close(it);
	return rc;
}

static int length_stale(char *dyn)
{
	struct ds d;
	eachobs_iter *it = open_iter(&d, 10, (eachobs_options){ 0 });
	const void *obs, *next;
	size_t len;

	cr_assert_eq(eachobs_next(it, &obs, NULL), 1);
	cr_assert_eq(eachobs_next(it, &next, NULL), 1);
	snprintf(dyn, 64, "%p", obs);
	int rc = eachobs_obs_length(it, obs, &len);
	eachobs_close(it);
	return rc;
}

static int set_length_outside(char *dyn)
{
	(void)dyn;
	return eachobs_set_length(4);
}

/* Inside getobs (SERIAL: on this thread); the message getobs saw is
 * copied back so that the table checks it like the others. */
static int set_length_too_long(char *dyn)
{
	struct ds d = ds_make(10);
	eachobs_dataset data = ds_data(&d, 8);
	eachobs_options o = { .executor = EACHOBS_SERIAL };
	eachobs_iter *it;

	(void)dyn;
	d.set_len_call = true;
	d.set_len = 9;
	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
	cr_assert_eq(eachobs_next(it, NULL, NULL), 1);
	eachobs_close(it);
	cr_assert_str_eq(eachobs_last_error(), d.set_len_msg,
			 "the message getobs saw is not the thread's");
	return d.set_len_rc;
}

static int stats_it_null(char *dyn)
{
	eachobs_stats st;

	(void)dyn;
	return eachobs_get_stats(NULL, &st);
}

static int stats_st_null(char *dyn)
{
	struct ds d;
	eachobs_iter *it = open_iter(&d, 10, (eachobs_options){ 0 });

	(void)dyn;
	int rc = eachobs_get_stats(it, NULL);
	eachobs_close(it);
	return rc;
}

static int stats_size(char *dyn)
{
	struct ds d;
	eachobs_iter *it = open_iter(&d, 10, (eachobs_options){ 0 });
	eachobs_stats st;

	(void)dyn;
	int rc = eachobs_get_stats_sized(it, &st, 8);
	eachobs_close(it);
	return rc;
}

static int interrupt_null(char *dyn)
{
	(void)dyn;
	return eachobs_interrupt(NULL);
}

/* ---- the table --------------------------------------------------------- */

/* "$" in needles stands for what run wrote into dyn. */
struct fail_case {
	const char *name;
	int (*run)(char *dyn);
	int code;
	const char *needles[4];
};

static const struct fail_case cases[] = {
	{ "parallel: it NULL", p_it_null, -EINVAL,
	  { "eachobs_parallel", "it is NULL" } },
	{ "parallel: data NULL", p_data_null, -EINVAL,
	  { "eachobs_parallel", "data is NULL" } },
	{ "parallel: numobs NULL", p_numobs_null, -EINVAL,
	  { "data->numobs", "NULL" } },
	{ "parallel: getobs NULL", p_getobs_null, -EINVAL,
	  { "data->getobs", "NULL" } },
	{ "parallel_sized: opts_size", p_opts_size, -EINVAL,
	  { "eachobs_parallel_sized", "opts_size 12" } },
	{ "parallel_sized: -E2BIG", p_e2big, -E2BIG,
	  { "opts_size", "$", "does not have" } },
	{ "parallel: executor", p_executor, -EINVAL,
	  { "executor 7", "eachobs_executor" } },
	{ "parallel: on_error", p_on_error, -EINVAL,
	  { "on_error 5", "eachobs_on_error" } },
	{ "parallel: nthreads", p_nthreads, -EINVAL,
	  { "nthreads 100000", "EACHOBS_MAX_THREADS", "1024" } },
	{ "parallel: stack_size", p_stack_size, -EINVAL,
	  { "stack_size 100", "PTHREAD_STACK_MIN", "$" } },
	{ "parallel: worker_nice < 0", p_nice_low, -EINVAL,
	  { "worker_nice -5", "0..19" } },
	{ "parallel: worker_nice > 19", p_nice_high, -EINVAL,
	  { "worker_nice 20", "0..19" } },
	{ "parallel: worker_cpus entry", p_cpu_range, -EINVAL,
	  { "worker_cpus[1] = 5000", "EACHOBS_MAX_CPU", "1024" } },
	{ "parallel: worker_cpus NULL", p_cpus_null, -EINVAL,
	  { "worker_cpus is NULL", "nworker_cpus 3" } },
	{ "parallel: batchsize", p_batchsize, -EINVAL,
	  { "batchsize 2147483649", "EACHOBS_MAX_BATCHSIZE" } },
	{ "parallel: hold", p_hold, -EINVAL,
	  { "hold 16777217", "EACHOBS_MAX_SLOTS" } },
	{ "parallel: indices entry", p_index, -EINVAL,
	  { "indices[2] = 150", "100" } },
	{ "parallel: indices NULL", p_indices_null, -EINVAL,
	  { "indices is NULL", "nindices 5" } },
	{ "parallel: shard_index", p_shard, -EINVAL,
	  { "shard_index 4", "shard_count 4" } },
	{ "parallel: buffersize", p_buffersize, -EINVAL,
	  { "buffersize 16777217", "EACHOBS_MAX_SLOTS" } },
	{ "parallel: slot count", p_slot_count, -EINVAL,
	  { "buffersize 16777216", "nthreads 4", "EACHOBS_MAX_SLOTS" } },
	{ "parallel: obs_size with batches", p_obs_size_batch, -EINVAL,
	  { "data->obs_size 18446744073709551615", "batchsize 64",
	    "overflow" } },
	{ "parallel: slot memory", p_slot_memory, -EINVAL,
	  { "data->obs_size 9223372036854775807", "overflow" } },
	{ "parallel: SERIAL slot memory", p_serial_memory, -EINVAL,
	  { "data->obs_size 9223372036854775807", "3 slots", "overflow" } },
	{ "parallel: -ENOMEM", p_enomem, -ENOMEM,
	  { "out of memory", "iterator" } },
	{ "parallel: -EAGAIN", p_eagain, -EAGAIN,
	  { "worker thread 2 of 4", "could not be created", "stack_size" } },
	{ "parallel: unusable CPU", p_cpu_unusable, -EAGAIN,
	  { "$", "cannot be used", "pthread_create" } },
	{ "parallel: unusable CPUs", p_cpus_unusable, -EAGAIN,
	  { "worker_cpus", "none of CPUs", "$" } },
	{ "pool_create: pool NULL", pool_null, -EINVAL,
	  { "eachobs_pool_create", "pool is NULL" } },
	{ "pool_create: nthreads 0", pool_zero, -EINVAL,
	  { "eachobs_pool_create", "nthreads 0", "1..EACHOBS_MAX_THREADS" } },
	{ "pool_create: nthreads 5000", pool_many, -EINVAL,
	  { "eachobs_pool_create", "nthreads 5000", "1024" } },
	{ "pool_create: -ENOMEM", pool_enomem, -ENOMEM,
	  { "eachobs_pool_create", "out of memory", "3 threads" } },
	{ "pool_create: -EAGAIN", pool_eagain, -EAGAIN,
	  { "eachobs_pool_create", "thread 3 of 3", "could not be created" } },
	{ "next: it NULL", next_null, -EINVAL,
	  { "eachobs_next", "it is NULL" } },
	{ "next: batched", next_batched, -EINVAL,
	  { "eachobs_next", "batchsize 64", "eachobs_next_batch" } },
	{ "next: getobs failed", next_getobs, -EBADMSG,
	  { "eachobs_next", "getobs(17) failed", "Bad message" } },
	{ "next: getobs positive", next_getobs_positive, -ERANGE,
	  { "eachobs_next", "getobs(17)", "positive" } },
	{ "next: getobs unknown code", next_getobs_unknown, -5000,
	  { "eachobs_next", "getobs(17)", "-5000" } },
	{ "next: -ENOBUFS", next_enobufs, -ENOBUFS,
	  { "eachobs_next", "hold 2", "eachobs_release" } },
	{ "next: -EINTR", next_eintr, -EINTR,
	  { "eachobs_next", "eachobs_interrupt" } },
	{ "next_batch: batch NULL", batch_null, -EINVAL,
	  { "eachobs_next_batch", "batch is NULL" } },
	{ "next_batch: it NULL", batch_it_null, -EINVAL,
	  { "eachobs_next_batch", "it is NULL" } },
	{ "next_batch: not batched", batch_unbatched, -EINVAL,
	  { "eachobs_next_batch", "batchsize 0", "eachobs_next" } },
	{ "next_batch: getobs failed", batch_getobs, -EIO,
	  { "eachobs_next_batch", "getobs(21) failed", "Input/output" } },
	{ "release: it NULL", release_it_null, -EINVAL,
	  { "eachobs_release", "it is NULL" } },
	{ "release: data NULL", release_data_null, -EINVAL,
	  { "eachobs_release", "data is NULL" } },
	{ "release: hold 0", release_no_hold, -EINVAL,
	  { "eachobs_release", "hold is 0" } },
	{ "release: twice", release_twice, -EINVAL,
	  { "eachobs_release", "$", "not a held item" } },
	{ "obs_length: it NULL", length_it_null, -EINVAL,
	  { "eachobs_obs_length", "it is NULL" } },
	{ "obs_length: obs NULL", length_obs_null, -EINVAL,
	  { "eachobs_obs_length", "obs is NULL" } },
	{ "obs_length: len NULL", length_len_null, -EINVAL,
	  { "eachobs_obs_length", "len is NULL" } },
	{ "obs_length: stale obs", length_stale, -EINVAL,
	  { "eachobs_obs_length", "$", "not a currently valid" } },
	{ "set_length: outside getobs", set_length_outside, -EINVAL,
	  { "eachobs_set_length", "inside a getobs" } },
	{ "set_length: too long", set_length_too_long, -EINVAL,
	  { "eachobs_set_length", "nbytes 9", "obs_size 8" } },
	{ "get_stats: it NULL", stats_it_null, -EINVAL,
	  { "eachobs_get_stats", "it is NULL" } },
	{ "get_stats: st NULL", stats_st_null, -EINVAL,
	  { "eachobs_get_stats", "st is NULL" } },
	{ "get_stats_sized: size", stats_size, -EINVAL,
	  { "eachobs_get_stats_sized", "size 8" } },
	{ "interrupt: it NULL", interrupt_null, -EINVAL,
	  { "eachobs_interrupt", "it is NULL" } },
};

#define NCASES (sizeof(cases) / sizeof(cases[0]))

/* Run case c and check its code and words; the message in msg. */
static void run_case(const struct fail_case *c, char *msg, size_t len)
{
	char dyn[64] = "";
	int rc = c->run(dyn);
	const char *m = eachobs_last_error();

	cr_assert_eq(rc, c->code, "%s: returned %d (%s), expected %d", c->name,
		     rc, eachobs_strerror(rc), c->code);
	cr_assert_not_null(m, "%s: eachobs_last_error() is NULL", c->name);
	for (size_t i = 0; i < 4 && c->needles[i]; i++) {
		const char *w = strcmp(c->needles[i], "$") ? c->needles[i] : dyn;
		cr_assert(strstr(m, w), "%s: \"%s\" does not contain \"%s\"",
			  c->name, m, w);
	}
	snprintf(msg, len, "%s", m);
}

Test(errors, every_failure_keeps_its_code_and_names_argument_and_value)
{
	char msg[512];

	for (size_t i = 0; i < NCASES; i++)
		run_case(&cases[i], msg, sizeof(msg));
	cr_assert_eq(eachobs__alloc_live(), 0);
}

Test(errors, every_message_has_one_style_and_reads_well)
{
	static char all[NCASES * 300];
	static char msgs[NCASES][512];
	size_t used = 0;

	for (size_t i = 0; i < NCASES; i++) {
		char *msg = msgs[i];
		run_case(&cases[i], msg, sizeof(msgs[i]));
		size_t n = strlen(msg);
		cr_assert_gt(n, 0, "%s: empty message", cases[i].name);
		cr_assert_lt(n, 255, "%s: \"%s\" is cut short", cases[i].name,
			     msg);
		cr_assert(islower((unsigned char)msg[0]),
			  "%s: \"%s\" does not start in lower case",
			  cases[i].name, msg);
		cr_assert(msg[n - 1] != '.' && !isspace((unsigned char)msg[n - 1]),
			  "%s: \"%s\" ends in a period or a space",
			  cases[i].name, msg);
		cr_assert_null(strchr(msg, '\n'), "%s: \"%s\" has a newline",
			       cases[i].name, msg);
		/* Each case reads differently: no two mistakes share a
		 * message any more. */
		for (size_t j = 0; j < i; j++)
			cr_assert_str_neq(msg, msgs[j], "%s and %s both read \"%s\"",
					  cases[j].name, cases[i].name, msg);
		used += (size_t)snprintf(all + used, sizeof(all) - used,
					 "\n  %-34s %s", cases[i].name, msg);
	}
	/* Once, to be read: test_errors --verbose, or meson's testlog.txt. */
	fprintf(stderr, "eachobs_last_error, one message per failure:%s\n", all);
}

/* ---- the promises of eachobs_last_error beside the messages ----------- */

static void *read_fresh(void *arg)
{
	const char **out = arg;

	*out = eachobs_last_error();
	return NULL;
}

Test(errors, a_thread_where_nothing_failed_reads_an_empty_string)
{
	const char *m = (const char *)(uintptr_t)1;
	pthread_t t;

	/* This thread fails first: the new thread must not see it. */
	cr_assert_eq(eachobs_pool_create(NULL, 1), -EINVAL);
	cr_assert_eq(pthread_create(&t, NULL, read_fresh, &m), 0);
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_assert_not_null(m);
	cr_assert_str_eq(m, "");
}

Test(errors, a_success_leaves_the_message_unchanged)
{
	struct ds d = ds_make(50);
	eachobs_dataset data = ds_data(&d, 8);
	eachobs_options o = { .nthreads = 2, .hold = 1 };
	eachobs_options serial = { .executor = EACHOBS_SERIAL,
				   .batchsize = 4 };
	eachobs_iter *it;
	eachobs_stats st;
	eachobs_batch b;
	eachobs_pool *pool;
	const void *obs;
	size_t len;
	char before[256];

	cr_assert_eq(start_with((eachobs_options){ .worker_nice = -5 }, 8),
		     -EINVAL);
	const char *m = eachobs_last_error();
	snprintf(before, sizeof(before), "%s", m);

	/* Every call that can fail, each succeeding on this thread. */
	cr_assert_eq(eachobs_pool_create(&pool, 1), 0);
	eachobs_pool_destroy(pool);
	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
	cr_assert_eq(eachobs_next(it, &obs, NULL), 1);
	cr_assert_eq(eachobs_obs_length(it, obs, &len), 0);
	cr_assert_eq(eachobs_release(it, obs), 0);
	cr_assert_eq(eachobs_get_stats(it, &st), 0);
	cr_assert_eq(eachobs_get_stats_sized(it, &st, sizeof(st)), 0);
	while (eachobs_next(it, &obs, NULL) == 1)
		cr_assert_eq(eachobs_release(it, obs), 0);
	cr_assert_eq(eachobs_next(it, &obs, NULL), 0, "the end is no failure");
	eachobs_close(it);
	/* eachobs_set_length succeeding inside a getobs on this thread. */
	d.set_len_call = true;
	d.set_len = 4;
	cr_assert_eq(eachobs_parallel_sized(&it, &data, &serial,
					    sizeof(serial)),
		     0);
	cr_assert_eq(eachobs_next_batch(it, &b), 1);
	cr_assert_eq(d.set_len_rc, 0);
	cr_assert_eq(eachobs_interrupt(it), 0);
	eachobs_close(it);
	cr_assert_eq(eachobs_last_error(), m, "the message moved");
	cr_assert_str_eq(eachobs_last_error(), before);
}

/* Two threads fail differently, each after the other has failed, and each
 * reads its own message. */
struct side {
	pthread_barrier_t *both_failed;
	eachobs_options o;
	char msg[256];
	int rc;
};

static void *fail_then_read(void *arg)
{
	struct side *p = arg;
	struct ds d = ds_make(10);
	eachobs_dataset data = ds_data(&d, 8);
	eachobs_iter *it;

	/* No Criterion assertion off the test's thread. */
	p->rc = eachobs_parallel(&it, &data, &p->o);
	pthread_barrier_wait(p->both_failed);
	snprintf(p->msg, sizeof(p->msg), "%s", eachobs_last_error());
	return NULL;
}

Test(errors, each_thread_reads_its_own_message)
{
	pthread_barrier_t both;
	struct side a = { .both_failed = &both, .o = { .nthreads = 100000 } };
	struct side c = { .both_failed = &both, .o = { .worker_nice = 42 } };
	pthread_t ta, tc;

	pthread_barrier_init(&both, NULL, 2);
	cr_assert_eq(pthread_create(&ta, NULL, fail_then_read, &a), 0);
	cr_assert_eq(pthread_create(&tc, NULL, fail_then_read, &c), 0);
	pthread_join(ta, NULL);
	pthread_join(tc, NULL);
	pthread_barrier_destroy(&both);
	cr_assert_eq(a.rc, -EINVAL);
	cr_assert_eq(c.rc, -EINVAL);
	cr_assert(strstr(a.msg, "nthreads 100000"), "thread a read \"%s\"", a.msg);
	cr_assert(strstr(c.msg, "worker_nice 42"), "thread c read \"%s\"", c.msg);
}

/* A getobs failure is set on the consumer's thread, the one whose
 * eachobs_next returns it (BACKGROUND: getobs never runs there), and every
 * sticky repetition says it again. */
Test(errors, a_getobs_failure_is_reported_on_the_consumers_thread)
{
	struct ds d = ds_make(40);
	eachobs_dataset data = ds_data(&d, 8);
	eachobs_options o = { .executor = EACHOBS_BACKGROUND, .nthreads = 2 };
	eachobs_iter *it;
	int rc;

	d.fail_idx = 17;
	d.fail_code = -EBADMSG;
	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
	while ((rc = eachobs_next(it, NULL, NULL)) == 1)
		;
	cr_assert_eq(rc, -EBADMSG);
	cr_assert(strstr(eachobs_last_error(), "getobs(17) failed"),
		  "read \"%s\"", eachobs_last_error());
	cr_assert_eq(eachobs_pool_create(NULL, 1), -EINVAL);
	cr_assert_eq(eachobs_next(it, NULL, NULL), -EBADMSG);
	cr_assert(strstr(eachobs_last_error(), "getobs(17) failed"),
		  "the sticky failure read \"%s\"", eachobs_last_error());
	eachobs_close(it);
}

/* The string stays valid and unchanged until the next failing call on
 * this thread, whatever other threads do. */
static void *fail_elsewhere(void *arg)
{
	(void)arg;
	for (int i = 0; i < 100; i++)
		eachobs_pool_create(NULL, 1);
	return NULL;
}

Test(errors, the_message_lasts_until_the_next_failure_on_this_thread)
{
	pthread_t t;

	cr_assert_eq(start_with((eachobs_options){ .shard_index = 9,
						   .shard_count = 3 },
				8),
		     -EINVAL);
	const char *m = eachobs_last_error();
	cr_assert_eq(pthread_create(&t, NULL, fail_elsewhere, NULL), 0);
	pthread_join(t, NULL);
	cr_assert_eq(eachobs_last_error(), m);
	cr_assert_str_eq(m, "shard_index 9 is not below shard_count 3");
	cr_assert_eq(eachobs_pool_create(NULL, 1), -EINVAL);
	cr_assert_str_eq(eachobs_last_error(),
			 "eachobs_pool_create: pool is NULL");
}

/* Every allocation of a start failing in turn: each -ENOMEM says what
 * could not be allocated. */
Test(errors, each_failed_allocation_says_what_it_was_for)
{
	for (int ordered = 0; ordered < 2; ordered++) {
		for (long k = 0;; k++) {
			struct ds d = ds_make(100);
			eachobs_dataset data = ds_data(&d, 24);
			eachobs_options o = { .nthreads = 2, .ordered = ordered,
					      .hold = 2 };
			eachobs_iter *it;

			cr_assert_lt(k, 100, "start still failing");
			eachobs__fault_alloc_after(k);
			int rc = eachobs_parallel(&it, &data, &o);
			eachobs__fault_alloc_after(-1);
			if (rc == 0) {
				eachobs_close(it);
				break;
			}
			cr_assert_eq(rc, -ENOMEM);
			cr_assert(strncmp(eachobs_last_error(), "out of memory for ",
					  18) == 0,
				  "allocation %ld: \"%s\"", k, eachobs_last_error());
		}
	}
}

/* Every thread creation of a start failing in turn: each -EAGAIN says
 * which thread could not be created, and why. */
Test(errors, each_failed_thread_creation_names_the_thread)
{
	for (long k = 0; k < 3; k++) {
		struct ds d = ds_make(100);
		eachobs_dataset data = ds_data(&d, 8);
		eachobs_options o = { .nthreads = 3,
				      .executor = EACHOBS_BACKGROUND };
		eachobs_iter *it;
		char want[64];

		eachobs__fault_thread_after(k);
		int rc = eachobs_parallel(&it, &data, &o);
		eachobs__fault_thread_after(-1);
		cr_assert_eq(rc, -EAGAIN);
		snprintf(want, sizeof(want), "worker thread %ld of 3 could not "
			 "be created", k + 1);
		cr_assert(strstr(eachobs_last_error(), want), "step %ld: \"%s\"",
			  k, eachobs_last_error());
	}
}
