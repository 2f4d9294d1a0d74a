#define _GNU_SOURCE
#define TEST_HELPERS_OWN
#include "helpers.h"
#include "buffer_rule.h"
#include "cpus.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A sentinel that eachobs_next must overwrite with NULL at the end. */
static const char not_written;
#define IDX_UNTOUCHED ((size_t)0x5eed5eed5eedULL)

uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

uint64_t splitmix64(uint64_t *state)
{
	*state += 0x9e3779b97f4a7c15ULL;
	return mix64(*state);
}

double now_s(void)
{
	return (double)now_ns() * 1e-9;
}

void sleep_us(unsigned us)
{
	sleep_ns((uint64_t)us * 1000u);
}

/* src/cpus.c; internal, reached through the static test library. */
unsigned eachobs__default_threads(void);

unsigned default_nthreads(void)
{
	return eachobs__default_threads();
}

size_t slot_bound(const eachobs_options *o, size_t obs_size)
{
	size_t nt, bs;

	if (o && o->executor == EACHOBS_SERIAL)
		return 1;
	nt = o && o->nthreads ? o->nthreads : default_nthreads();
	/* Counted as unbatched, whatever o->batchsize: the callers' units
	 * are single observations. */
	bs = o && o->buffersize
		     ? o->buffersize
		     : rule_default_buffersize(false,
					       o && o->ordered && !o->batchsize,
					       nt, rule_unit_bytes(1, obs_size));
	return bs + nt + 1;
}

/* ---- the watchdog -------------------------------------------------- */

struct watchdog {
	struct timespec deadline;
	double seconds;
	char name[160];
};

static void *watchdog_main(void *arg)
{
	struct watchdog *wd = arg;

	/* A deadline timer, not synchronization: nothing waits for it. */
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &wd->deadline,
			       NULL) == EINTR)
		;
	fprintf(stderr, "\n*** watchdog: %s still running after %.0f s: a deadlock "
			"or a lost wake-up? Aborting. ***\n", wd->name, wd->seconds);
	fflush(stderr);
	abort();
	return NULL;
}

void watchdog_start(double seconds, const char *name)
{
	static struct watchdog wd;
	pthread_attr_t attr;
	pthread_t t;

	clock_gettime(CLOCK_MONOTONIC, &wd.deadline);
	wd.deadline.tv_sec += (time_t)seconds;
	wd.seconds = seconds;
	snprintf(wd.name, sizeof(wd.name), "%s", name ? name : "the test");
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, watchdog_main, &wd) != 0) {
		fprintf(stderr, "watchdog: cannot start its thread\n");
		abort();
	}
	pthread_attr_destroy(&attr);
}

/* ---- counting threads --------------------------------------------- */

int threads_now(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

int threads_settle(int want, double deadline_s)
{
	double end = now_s() + deadline_s;
	int n;

	while ((n = threads_now()) > want && now_s() < end)
		sched_yield();
	return n;
}

/* ---- the dataset ---------------------------------------------------- */

void td_violate(struct td *td, const char *fmt, ...)
{
	int expected = 0;
	va_list ap;

	/* Keep the first violation only; later ones race for nothing. */
	if (!atomic_compare_exchange_strong(&td->violated, &expected, 1))
		return;
	va_start(ap, fmt);
	vsnprintf(td->violation, sizeof(td->violation), fmt, ap);
	va_end(ap);
	atomic_store(&td->violated, 2);
}

const char *td_violation(struct td *td)
{
	/* The message is complete once the flag reads 2; every caller runs
	 * after the callbacks finished (the library joined its threads or the
	 * consumer received the observation), so 1 is not seen in practice. */
	int v = atomic_load(&td->violated);

	if (v == 0)
		return NULL;
	return v == 2 ? td->violation : "(violation message being written)";
}

static void update_max(atomic_long *max, long v)
{
	long cur = atomic_load(max);

	while (v > cur && !atomic_compare_exchange_weak(max, &cur, v))
		;
}

static size_t td_numobs(void *ctx)
{
	struct td *td = ctx;

	atomic_fetch_add(&td->numobs_calls, 1);
	if (!pthread_equal(pthread_self(), td->creator))
		atomic_fetch_add(&td->numobs_off_creator, 1);
	return td->n;
}

static uint64_t pattern_word(const struct td *td, size_t idx, size_t j)
{
	return mix64(td->seed ^ ((uint64_t)idx * 0x9e3779b97f4a7c15ULL) ^
		     ((uint64_t)j * 0xd1b54a32d192ed03ULL));
}

void td_pattern_fill(const struct td *td, size_t idx, void *obs)
{
	unsigned char *p = obs;

	for (size_t j = 0; j < td->obs_size; j += 8) {
		uint64_t w = pattern_word(td, idx, j);
		size_t k = td->obs_size - j < 8 ? td->obs_size - j : 8;

		memcpy(p + j, &w, k);
	}
}

bool td_pattern_ok(const struct td *td, size_t idx, const void *obs)
{
	const unsigned char *p = obs;

	for (size_t j = 0; j < td->obs_size; j += 8) {
		uint64_t w = pattern_word(td, idx, j);
		size_t k = td->obs_size - j < 8 ? td->obs_size - j : 8;

		if (memcmp(p + j, &w, k) != 0)
			return false;
	}
	return true;
}

static void td_sleep(const struct td *td, size_t idx)
{
	unsigned us = idx < td->sleep_below ? td->sleep_us : 0;

	if (idx == td->slow_idx)
		us += td->slow_us;

	if (td->rand_sleep_us) {
		uint64_t h = mix64(td->seed ^ 0x5151 ^ (uint64_t)idx);

		/* A quarter of the indices sleep, for 0..rand_sleep_us. */
		if ((h & 3) == 0)
			us += (unsigned)((h >> 8) % (td->rand_sleep_us + 1u));
	}
	if (us)
		sleep_us(us);
}

static int td_getobs(void *ctx, size_t idx, void *obs)
{
	struct td *td = ctx;
	int rc = 0;

	if (atomic_load(&td->closed))
		td_violate(td, "getobs(%zu) ran after eachobs_close returned", idx);
	if (atomic_load(&td->closing))
		atomic_fetch_add(&td->after_closing, 1);
	atomic_fetch_add(&td->in_getobs, 1);
	update_max(&td->max_live, atomic_fetch_add(&td->live, 1) + 1);
	atomic_fetch_add(&td->getobs_calls, 1);
	if (!obs)
		td_violate(td, "getobs(%zu) got a NULL slot", idx);
	else if ((uintptr_t)obs % 64 != 0)
		td_violate(td, "getobs(%zu) got slot %p, not 64-byte aligned", idx, obs);
	if (idx >= td->n)
		td_violate(td, "getobs(%zu) called with n = %zu", idx, td->n);
	if (td->window) {
		size_t released = atomic_load(&td->released);

		if (idx >= released + td->window)
			td_violate(td, "ordered: getobs(%zu) started when only %zu "
				    "observations were released (window %zu)",
				idx, released, td->window);
	}
	if (idx < td->track_n) {
		if (atomic_fetch_add(&td->calls[idx], 1) != 0)
			td_violate(td, "getobs(%zu) called more than once", idx);
		atomic_store(&td->slot_of[idx], obs);
	}
	if (td->check_threads) {
		if (pthread_equal(pthread_self(), td->consumer))
			atomic_fetch_add(&td->on_consumer, 1);
		else
			atomic_fetch_add(&td->off_consumer, 1);
	}
	td_sleep(td, idx);
	if (obs && td->fill)
		td_pattern_fill(td, idx, obs);
	if (obs && td->write_idx && td->obs_size >= sizeof(size_t))
		memcpy(obs, &idx, sizeof(idx));
	if (idx == td->fail_idx)
		rc = td->fail_code;
	/* A failed load yields nothing: its slot is not held by anyone. */
	if (rc != 0)
		atomic_fetch_sub(&td->live, 1);
	atomic_fetch_sub(&td->in_getobs, 1);
	return rc;
}

void td_init(struct td *td, size_t n, size_t obs_size, size_t track_n_max)
{
	memset(td, 0, sizeof(*td));
	td->n = n;
	td->obs_size = obs_size;
	td->seed = 0x0b5e55edULL;
	td->fail_idx = TD_NONE;
	td->slow_idx = TD_NONE;
	td->sleep_below = TD_NONE;
	td->fill = obs_size > 0;
	td->creator = pthread_self();
	td->consumer = pthread_self();
	atomic_init(&td->numobs_calls, 0);
	atomic_init(&td->numobs_off_creator, 0);
	atomic_init(&td->getobs_calls, 0);
	atomic_init(&td->in_getobs, 0);
	atomic_init(&td->live, 0);
	atomic_init(&td->max_live, 0);
	atomic_init(&td->on_consumer, 0);
	atomic_init(&td->off_consumer, 0);
	atomic_init(&td->closing, false);
	atomic_init(&td->after_closing, 0);
	atomic_init(&td->closed, false);
	atomic_init(&td->released, 0);
	atomic_init(&td->violated, 0);
	if (n <= track_n_max) {
		td->track_n = n;
		/* calloc zeroes; all-zero is a valid initial atomic here. */
		td->calls = calloc(n ? n : 1, sizeof(*td->calls));
		td->slot_of = calloc(n ? n : 1, sizeof(*td->slot_of));
		if (!td->calls || !td->slot_of) {
			fprintf(stderr, "helpers: out of memory\n");
			abort();
		}
	}
}

void td_fini(struct td *td)
{
	free(td->calls);
	free(td->slot_of);
	td->calls = NULL;
	td->slot_of = NULL;
}

eachobs_dataset td_dataset(struct td *td)
{
	return (eachobs_dataset){ .ctx = td,
				  .numobs = td_numobs,
				  .getobs = td_getobs,
				  .obs_size = td->obs_size };
}

/* ---- the consumer --------------------------------------------------- */

static void cons_err(struct cons *c, const char *fmt, ...)
{
	va_list ap;

	if (c->err[0])
		return;
	va_start(ap, fmt);
	vsnprintf(c->err, sizeof(c->err), fmt, ap);
	va_end(ap);
}

void cons_init(struct cons *c, eachobs_iter *it, struct td *td, bool ordered)
{
	memset(c, 0, sizeof(*c));
	c->it = it;
	c->td = td;
	c->ordered = ordered;
	if (td->track_n == td->n && td->calls) {
		c->seen = calloc(td->n ? td->n : 1, 1);
		if (!c->seen) {
			fprintf(stderr, "helpers: out of memory\n");
			abort();
		}
	}
}

void cons_fini(struct cons *c)
{
	free(c->seen);
	c->seen = NULL;
}

static void check_held(struct cons *c)
{
	const struct td *td = c->td;
	size_t stored;

	if (td->fill && !td_pattern_ok(td, c->held_idx, c->held_obs))
		cons_err(c, "the bytes of observation %zu changed while the "
			    "consumer held it", c->held_idx);
	if (td->write_idx && td->obs_size >= sizeof(size_t)) {
		memcpy(&stored, c->held_obs, sizeof(stored));
		if (stored != c->held_idx)
			cons_err(c, "observation %zu changed to %zu while held",
				 c->held_idx, stored);
	}
}

static void check_yield(struct cons *c, const void *obs, size_t idx)
{
	struct td *td = c->td;
	size_t stored;
	char why[128];

	if (!obs) {
		cons_err(c, "eachobs_next returned 1 with a NULL observation (idx %zu)", idx);
		return;
	}
	if (!check_index(c->seen, td->n, c->ordered, c->yielded, idx, why,
			 sizeof(why))) {
		cons_err(c, "%s", why);
		return;
	}
	if (idx < td->track_n) {
		void *slot = atomic_load(&td->slot_of[idx]);
		unsigned calls = atomic_load(&td->calls[idx]);

		if (calls != 1)
			cons_err(c, "idx %zu yielded after %u getobs calls", idx, calls);
		if (slot != obs)
			cons_err(c, "idx %zu yielded at %p but getobs wrote %p "
				    "(a copy, or the wrong slot)", idx, obs, slot);
	}
	if (td->fill && !td_pattern_ok(td, idx, obs))
		cons_err(c, "idx %zu yielded with bytes getobs did not write", idx);
	if (td->write_idx && td->obs_size >= sizeof(size_t)) {
		memcpy(&stored, obs, sizeof(stored));
		if (stored != idx)
			cons_err(c, "idx %zu yielded a slot holding %zu", idx, stored);
	}
}

/* Whether rc is what eachobs_next reports for td's failing getobs: only
 * such a code writes *idx (the header: -EINTR, -ENOBUFS and -EINVAL of
 * the library's own leave it). */
static bool is_getobs_code(const struct td *td, int rc)
{
	int code = td->fail_code;

	if (td->fail_idx == TD_NONE)
		return false;
	return rc == (code > 0 ? -ERANGE : code == -EINTR ? -ERESTART : code);
}

int cons_next(struct cons *c, const void **obsp, size_t *idxp)
{
	const void *obs = &not_written;
	size_t idx = IDX_UNTOUCHED;
	int rc;

	if (c->held) {
		check_held(c);
		atomic_fetch_sub(&c->td->live, 1);
		atomic_fetch_add(&c->td->released, 1);
		c->held = false;
	}
	rc = eachobs_next(c->it, &obs, &idx);
	if (rc == 1) {
		check_yield(c, obs, idx);
		c->held = true;
		c->held_idx = idx;
		c->held_obs = obs;
		c->last_idx = idx;
		c->yielded++;
	} else if (rc == 0) {
		if (obs != NULL)
			cons_err(c, "eachobs_next returned 0 without setting *obs to NULL");
		if (idx != IDX_UNTOUCHED)
			cons_err(c, "eachobs_next returned 0 and wrote *idx = %zu "
				    "(it must stay untouched at the end)", idx);
	} else if (rc < 0) {
		if (obs != NULL)
			cons_err(c, "eachobs_next returned %d without setting *obs to NULL", rc);
		if (is_getobs_code(c->td, rc) && idx == IDX_UNTOUCHED)
			cons_err(c, "eachobs_next returned getobs's %d without "
				    "setting *idx", rc);
		else if (is_getobs_code(c->td, rc) && idx != c->td->fail_idx)
			cons_err(c, "eachobs_next returned getobs's %d with *idx = "
				    "%zu, not the failed index %zu", rc, idx,
				 c->td->fail_idx);
		else if (!is_getobs_code(c->td, rc) && idx != IDX_UNTOUCHED)
			cons_err(c, "eachobs_next returned %d, not a getobs code, "
				    "and wrote *idx = %zu", rc, idx);
	} else {
		cons_err(c, "eachobs_next returned %d", rc);
	}
	if (obsp)
		*obsp = obs;
	if (idxp)
		*idxp = idx;
	return rc;
}

void cons_close(struct cons *c)
{
	long running;

	if (c->held) {
		check_held(c);
		atomic_fetch_sub(&c->td->live, 1);
		c->held = false;
	}
	atomic_store(&c->td->closing, true);
	eachobs_close(c->it);
	c->it = NULL;
	atomic_store(&c->td->closed, true);
	running = atomic_load(&c->td->in_getobs);
	if (running != 0)
		cons_err(c, "%ld getobs calls still running after eachobs_close returned",
			 running);
}

bool cons_all_seen(struct cons *c)
{
	if (!c->seen)
		return false;
	for (size_t i = 0; i < c->td->n; i++)
		if (!c->seen[i])
			return false;
	return true;
}

const eachobs_executor executors[NEXECUTORS] = {
	EACHOBS_THREADED,
	EACHOBS_BACKGROUND,
	EACHOBS_SERIAL,
};

int threads_base;

void deadline_after(double seconds)
{
	char name[200];

	snprintf(name, sizeof(name), "%s::%s", criterion_current_suite->name,
		 criterion_current_test->name);
	watchdog_start(seconds, name);
	threads_base = threads_now();
}

void deadline(void)
{
	deadline_after(40);
}

void thread_set_init(struct thread_set *s)
{
	pthread_mutex_init(&s->lock, NULL);
	s->n = 0;
}

void thread_set_fini(struct thread_set *s)
{
	pthread_mutex_destroy(&s->lock);
}

void thread_set_add(struct thread_set *s, pthread_t t)
{
	bool known = false;

	pthread_mutex_lock(&s->lock);
	for (unsigned i = 0; i < s->n && !known; i++)
		known = pthread_equal(s->tids[i], t);
	if (!known && s->n < THREAD_SET_MAX)
		s->tids[s->n++] = t;
	pthread_mutex_unlock(&s->lock);
}

/* ---- the option space ---------------------------------------------- */

void point_name(const struct point *p, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s batch %zu hold %u%s", executor_name(p->ex),
		 p->ordered ? " ordered" : "", p->batchsize, p->hold,
		 p->pool ? " pool" : "");
}

/* The points of executor ex and ordering `ordered`, in a fixed order. */
static void points_of(eachobs_executor ex, bool ordered, const size_t *sizes,
		      size_t nsizes, eachobs_pool *pool,
		      void (*f)(const struct point *, eachobs_pool *))
{
	for (size_t s = 0; s < nsizes; s++)
		for (unsigned h = 0; h <= 2; h += 2)
			for (int pl = 0; pl < 2; pl++) {
				struct point p = { ex, ordered, sizes[s], h, pl };
				f(&p, pool);
			}
}

int points_each(const size_t *sizes, size_t nsizes, unsigned pool_threads,
		void (*f)(const struct point *, eachobs_pool *))
{
	eachobs_pool *pool;

	if (eachobs_pool_create(&pool, pool_threads) != 0)
		return -1;
	for (size_t e = 0; e < NEXECUTORS; e++)
		for (int o = 0; o < 2; o++)
			points_of(executors[e], o, sizes, nsizes, pool, f);
	eachobs_pool_destroy(pool);
	return 0;
}

int points_of_mode(const struct mode *m, const size_t *sizes, size_t nsizes,
		   unsigned pool_threads,
		   void (*f)(const struct point *, eachobs_pool *))
{
	eachobs_pool *pool;

	if (eachobs_pool_create(&pool, pool_threads) != 0)
		return -1;
	points_of(m->executor, m->ordered, sizes, nsizes, pool, f);
	eachobs_pool_destroy(pool);
	return 0;
}

/* ---- the modes ----------------------------------------------------- */

/* The modes with workers first, so that worker_mode_params is a prefix. */
static const struct mode modes[] = {
	{ EACHOBS_THREADED, false },
	{ EACHOBS_THREADED, true },
	{ EACHOBS_BACKGROUND, false },
	{ EACHOBS_BACKGROUND, true },
	{ EACHOBS_SERIAL, false },
	{ EACHOBS_SERIAL, true },
};
#define NMODES (sizeof(modes) / sizeof(modes[0]))
#define NWORKER_MODES (NMODES - 2)

struct criterion_test_params mode_params(void)
{
	return cr_make_param_array(struct mode, modes, NMODES);
}

struct criterion_test_params worker_mode_params(void)
{
	return cr_make_param_array(struct mode, modes, NWORKER_MODES);
}

const char *mode_name(const struct mode *m)
{
	switch (m->executor) {
	case EACHOBS_THREADED:
		return m->ordered ? "THREADED ordered" : "THREADED";
	case EACHOBS_BACKGROUND:
		return m->ordered ? "BACKGROUND ordered" : "BACKGROUND";
	case EACHOBS_SERIAL:
		return m->ordered ? "SERIAL ordered" : "SERIAL";
	}
	return "?";
}

bool test_under_memcheck(void)
{
	return getenv("EACHOBS_TEST_MEMCHECK") != NULL;
}

bool test_autotuned(void)
{
	const char *v = getenv("EACHOBS_TEST_AUTOTUNE");

	return v && strcmp(v, "1") == 0;
}

int test_parallel(eachobs_iter **it, const eachobs_dataset *data,
		  const eachobs_options *opts)
{
	eachobs_options o = { 0 };

	if (!test_autotuned())
		return eachobs_parallel(it, data, opts);
	if (opts)
		o = *opts;
	o.autotune = true;
	/* The bound the test counted on: its slots, its window. */
	if (!o.nthreads && !o.pool && o.executor != EACHOBS_SERIAL)
		o.nthreads = eachobs__default_threads();
	return eachobs_parallel(it, data, &o);
}
