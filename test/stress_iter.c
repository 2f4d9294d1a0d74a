/*
 * Stress: several consumer threads, started together on a barrier, each
 * run random iterators one after another and check every promise that can
 * be checked from outside: every index exactly once (in order when asked),
 * slot bytes written by getobs and unchanged while held, the memory bound,
 * which threads ran getobs, error reporting and early close. Some
 * iterators place their workers (worker_nice, one of the process's CPUs),
 * so that threads of the shared pool move between placements under TSan.
 *
 * A plain main(), not Criterion, so that it runs under ThreadSanitizer.
 *
 * usage: stress_iter [ITERATIONS [SEED [CONSUMERS [SECONDS]]]]
 * With SECONDS > 0 it soaks: each consumer runs random configurations until
 * the time is up (ITERATIONS is then ignored), and the totals are printed.
 * SEED `random` draws a new seed from the clock and prints it first, so that
 * every CI soak explores new configurations and a failure stays replayable.
 * `stress_iter replay SEED` runs the one configuration a failure printed.
 * A watchdog turns a hang into a failure that prints the configuration.
 */
#define _GNU_SOURCE
#include "eachobs.h"
#include "buffer_rule.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct cfg {
	unsigned long long seed;
	size_t n, obs_size, close_after, fail_at;
	eachobs_options o;
	int sleep_us; /* max getobs sleep */
	int consumer_us; /* the consumer's own work per observation */
	bool use_pool;   /* borrow threads from the pool every consumer shares */
	bool interrupts; /* another thread calls eachobs_interrupt meanwhile */
	int pin_cpu;     /* -1, or the one CPU of worker_cpus */
};

struct ds {
	struct cfg c;
	pthread_t consumer;
	atomic_uchar *calls; /* getobs calls per index */
	atomic_long live, max_live;
	atomic_int consumer_ran;
};

static atomic_llong progress[64];
static atomic_llong total_configs, total_observations, total_failures;
static struct cfg current[64];
static eachobs_pool *shared_pool;
/* The CPUs this process may run on, which worker_cpus draws from. */
static unsigned allowed_cpus[CPU_SETSIZE], nallowed_cpus;

static void read_allowed_cpus(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return;
	for (unsigned c = 0; c < CPU_SETSIZE && c < EACHOBS_MAX_CPU; c++)
		if (CPU_ISSET(c, &set))
			allowed_cpus[nallowed_cpus++] = c;
}

static unsigned long long next_rand(unsigned long long *s)
{
	unsigned long long z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static unsigned char pattern(size_t idx, size_t byte)
{
	return (unsigned char)(idx * 131 + byte * 7 + 1);
}

static void print_cfg(FILE *f, const struct cfg *c)
{
	fprintf(f,
		"seed=%llu n=%zu obs_size=%zu nthreads=%u buffersize=%zu "
		"basesize=%zu oversub=%u executor=%d ordered=%d sleep_us=%d "
		"close_after=%zu fail_at=%zu on_error=%d consumer_us=%d "
		"batchsize=%zu drop_last=%d hold=%u use_pool=%d "
		"interrupts=%d worker_nice=%d pin_cpu=%d autotune=%d\n",
		c->seed, c->n, c->obs_size, c->o.nthreads, c->o.buffersize,
		c->o.basesize, c->o.oversubscription, (int)c->o.executor,
		(int)c->o.ordered, c->sleep_us, c->close_after, c->fail_at,
		(int)c->o.on_error, c->consumer_us, c->o.batchsize,
		(int)c->o.drop_last, c->o.hold, (int)c->use_pool,
		(int)c->interrupts, c->o.worker_nice, c->pin_cpu,
		(int)c->o.autotune);
}

#define CHECK(cond, c, ...)                                                \
	do {                                                               \
		if (!(cond)) {                                             \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                      \
			fprintf(stderr, "\n  config: ");                   \
			print_cfg(stderr, c);                              \
			exit(1);                                           \
		}                                                          \
	} while (0)

static size_t numobs(void *ctx)
{
	return ((struct ds *)ctx)->c.n;
}

static void note_live(struct ds *d, long delta)
{
	long now = atomic_fetch_add(&d->live, delta) + delta;
	long max = atomic_load(&d->max_live);

	while (now > max && !atomic_compare_exchange_weak(&d->max_live, &max, now))
		;
}

static int getobs(void *ctx, size_t idx, void *obs)
{
	struct ds *d = ctx;
	unsigned char *p = obs;

	note_live(d, 1);
	atomic_fetch_add(&d->calls[idx], 1);
	if (pthread_equal(pthread_self(), d->consumer))
		atomic_store(&d->consumer_ran, 1);
	if (d->c.sleep_us) {
		struct timespec ts = { 0, (long)((idx * 2654435761u) %
					       (unsigned)d->c.sleep_us) * 1000 };
		nanosleep(&ts, NULL);
	}
	for (size_t b = 0; b < d->c.obs_size; b++)
		p[b] = pattern(idx, b);
	if (idx != d->c.fail_at)
		return 0;
	note_live(d, -1); /* the consumer never sees it to move past it */
	return -EIO;
}

static struct cfg random_cfg(unsigned long long *s)
{
	static const size_t ns[] = { 0, 1, 2, 17, 100, 1000, 3000 };
	static const unsigned ts[] = { 1, 2, 3, 8, 64 };
	static const size_t bufs[] = { 1, 2, 5, 64, 0 };
	static const size_t sizes[] = { 0, 1, 8, 4096 };
	struct cfg c = { .seed = *s };

	c.n = ns[next_rand(s) % 7];
	c.obs_size = sizes[next_rand(s) % 4];
	c.o.nthreads = ts[next_rand(s) % 5];
	c.o.buffersize = bufs[next_rand(s) % 5];
	c.o.basesize = next_rand(s) % 3 ? 0 : 1 + next_rand(s) % 50;
	c.o.oversubscription = (unsigned)(next_rand(s) % 4);
	c.o.executor = (eachobs_executor)(next_rand(s) % 3);
	c.o.ordered = next_rand(s) % 2;
	c.sleep_us = next_rand(s) % 4 == 0 ? 50 : 0;
	c.close_after = next_rand(s) % 4 == 0 ? next_rand(s) % (c.n + 1) : SIZE_MAX;
	c.fail_at = next_rand(s) % 6 == 0 && c.n ? next_rand(s) % c.n : SIZE_MAX;
	c.o.on_error = next_rand(s) % 2 ? EACHOBS_ON_ERROR_SKIP
					: EACHOBS_ON_ERROR_STOP;
	c.consumer_us = next_rand(s) % 5 == 0 ? (int)(next_rand(s) % 100) : 0;
	if (next_rand(s) % 3 == 0) {
		static const size_t bss[] = { 1, 3, 16, 64 };
		c.o.batchsize = bss[next_rand(s) % 4];
		c.o.drop_last = next_rand(s) % 2;
	}
	if (next_rand(s) % 3 == 0)
		c.o.hold = 1 + (unsigned)(next_rand(s) % 4);
	c.use_pool = next_rand(s) % 3 == 0;
	c.interrupts = next_rand(s) % 4 == 0;
	/* Placement, last so that older seeds keep the draws above: on the
	 * shared pool, consumers borrow threads that another's iterator just
	 * placed elsewhere. */
	c.o.worker_nice = next_rand(s) % 4 == 0 ? 5 * (1 + (int)(next_rand(s) % 2))
						: 0;
	c.pin_cpu = next_rand(s) % 4 == 0 && nallowed_cpus
			    ? (int)allowed_cpus[next_rand(s) % nallowed_cpus]
			    : -1;
	/* Autotune, last for the same reason: nthreads becomes a bound,
	 * threads start and park while the consumer runs. */
	c.o.autotune = next_rand(s) % 3 == 0;
	return c;
}

/* The documented bound on observations alive at once: units of memory
 * (buffersize + workers + max(1, hold); SERIAL max(1, hold)) times the
 * observations in a unit. */
static long slot_bound(const struct cfg *c, size_t nthreads_resolved)
{
	size_t cap = c->o.batchsize ? c->o.batchsize : 1;
	size_t hold = c->o.hold ? c->o.hold : 1;

	if (c->o.executor == EACHOBS_SERIAL)
		return (long)(hold * cap);
	size_t b = c->o.buffersize;
	if (!b)
		b = rule_default_buffersize(c->o.batchsize != 0, c->o.ordered,
					    nthreads_resolved,
					    rule_unit_bytes(cap, c->obs_size));
	return (long)((b + nthreads_resolved + hold) * cap);
}

/* Check the bytes of a held observation. */
static void check_bytes(const struct cfg *c, const void *obs, size_t idx)
{
	const unsigned char *p = obs;

	for (size_t b = 0; b < c->obs_size; b++)
		CHECK(p[b] == pattern(idx, b), c,
		      "slot of index %zu byte %zu is %u, expected %u", idx, b,
		      p[b], pattern(idx, b));
}


/* Interrupts at random moments while the consumer runs; the consumer
 * answers -EINTR by calling again, so everything else it checks holds. */
struct interrupter {
	eachobs_iter *it;
	atomic_bool stop;
	unsigned long long rnd;
	pthread_t thread;
};

static void *interrupt_main(void *arg)
{
	struct interrupter *x = arg;

	while (!atomic_load(&x->stop)) {
		eachobs_interrupt(x->it);
		struct timespec pause = { 0, (long)(next_rand(&x->rnd) % 200000) };
		nanosleep(&pause, NULL);
	}
	return NULL;
}

static void interrupter_start(struct interrupter *x, const struct cfg *c,
			      eachobs_iter *it)
{
	x->it = it;
	atomic_init(&x->stop, false);
	x->rnd = c->seed ^ 0x1234;
	if (c->interrupts)
		CHECK(pthread_create(&x->thread, NULL, interrupt_main, x) == 0, c,
		      "pthread_create");
}

/* Before the checks after the loop. An interrupt sent before this may
 * still be pending, so those checks call again on -EINTR too. */
static void interrupter_stop(struct interrupter *x, const struct cfg *c)
{
	if (c->interrupts && !atomic_exchange(&x->stop, true))
		pthread_join(x->thread, NULL);
}

static int next_retry(eachobs_iter *it, const void **obs, size_t *idx)
{
	int rc;

	while ((rc = eachobs_next(it, obs, idx)) == -EINTR)
		;
	return rc;
}

static int next_batch_retry(eachobs_iter *it, eachobs_batch *b)
{
	int rc;

	while ((rc = eachobs_next_batch(it, b)) == -EINTR)
		;
	return rc;
}

static void run_units(int who, const struct cfg *c, struct ds *d,
		      eachobs_iter *it, struct interrupter *x);

static void run_one(int who, const struct cfg *c)
{
	struct interrupter x;
	struct ds d = { .c = *c, .consumer = pthread_self() };
	unsigned char *seen = calloc(c->n + 1, 1);
	eachobs_iter *it;
	const void *obs = NULL, *prev = NULL;
	size_t idx = 0, prev_idx = 0, count = 0, expect = 0;
	int rc;

	d.calls = calloc(c->n + 1, sizeof(*d.calls));
	CHECK(seen && d.calls, c, "test out of memory");
	current[who] = *c;
	eachobs_options o = c->o;
	unsigned cpu = (unsigned)c->pin_cpu; /* read at start only */
	if (c->use_pool)
		o.pool = shared_pool;
	if (c->pin_cpu >= 0) {
		o.worker_cpus = &cpu;
		o.nworker_cpus = 1;
	}
	rc = eachobs_parallel(&it, &(eachobs_dataset){ &d, numobs, getobs,
						       c->obs_size },
			      &o);
	CHECK(rc == 0, c, "eachobs_parallel: %s", eachobs_strerror(rc));
	interrupter_start(&x, c, it);
	while (!c->o.batchsize && !c->o.hold && count < c->close_after) {
		if (prev)
			check_bytes(c, prev, prev_idx); /* unchanged while held */
		if (prev)
			note_live(&d, -1);
		rc = next_retry(it, &obs, &idx);
		prev = NULL;
		if (rc != 1)
			break;
		CHECK(idx < c->n && !seen[idx], c, "index %zu twice or out of range", idx);
		seen[idx] = 1;
		CHECK(idx != c->fail_at, c, "failed index %zu yielded", idx);
		if (expect == c->fail_at)
			expect++; /* skipped (under STOP we never get here) */
		if (c->o.ordered || c->o.executor == EACHOBS_SERIAL)
			CHECK(idx == expect, c, "index %zu, expected %zu", idx, expect);
		expect++;
		check_bytes(c, obs, idx);
		prev = obs;
		prev_idx = idx;
		count++;
		atomic_fetch_add(&progress[who], 1);
		if (c->consumer_us) {
			struct timespec work = { 0, c->consumer_us * 1000L };
			nanosleep(&work, NULL);
		}
	}
	if (rc == 1 && prev)
		note_live(&d, -1);
	if (c->o.batchsize || c->o.hold) {
		run_units(who, c, &d, it, &x);
		goto close;
	}
	interrupter_stop(&x, c);
	bool skip = c->o.on_error == EACHOBS_ON_ERROR_SKIP;
	if (count < c->close_after && (c->fail_at == SIZE_MAX || skip)) {
		size_t want = c->n - (c->fail_at != SIZE_MAX);
		CHECK(rc == 0 && count == want, c, "ended with %d after %zu", rc,
		      count);
		CHECK(next_retry(it, &obs, &idx) == 0, c, "0 is not sticky");
		CHECK(eachobs_failures(it, NULL, 0) == c->n - want, c,
		      "%zu failures counted", eachobs_failures(it, NULL, 0));
	}
	CHECK(!skip || rc >= 0, c, "skip mode returned %d", rc);
	if (rc < 0 && c->fail_at != SIZE_MAX) {
		CHECK(rc == -EIO && idx == c->fail_at, c, "error %d at %zu", rc, idx);
		if (c->o.ordered || c->o.executor == EACHOBS_SERIAL)
			CHECK(count == c->fail_at, c, "%zu yielded before failure", count);
		size_t again = 0;
		CHECK(next_retry(it, &obs, &again) == -EIO && again == c->fail_at,
		      c, "error is not sticky");
	}
	atomic_fetch_add(&total_observations, (long long)count);
close:
	interrupter_stop(&x, c);
	eachobs_close(it);
	atomic_fetch_add(&total_configs, 1);
	atomic_fetch_add(&total_failures, c->fail_at < c->n);
	CHECK(atomic_load(&d.max_live) <= slot_bound(c, c->o.nthreads), c,
	      "%ld observations alive at once, bound %ld",
	      atomic_load(&d.max_live), slot_bound(c, c->o.nthreads));
	for (size_t i = 0; i < c->n; i++)
		CHECK(atomic_load(&d.calls[i]) <= 1, c, "getobs(%zu) ran twice", i);
	if (c->o.executor == EACHOBS_BACKGROUND)
		CHECK(!atomic_load(&d.consumer_ran), c, "consumer ran getobs");
	free(seen);
	free(d.calls);
}

/* ---- batches and hold: units the consumer holds and releases ------- */

struct unit {
	const void *data;
	size_t count;
	size_t *idx; /* copied: the library's array is valid only while held */
};

struct units_run {
	const struct cfg *c;
	struct ds *d;
	eachobs_iter *it;
	struct unit *held;
	unsigned nheld, max;
	unsigned char *seen;
	size_t count, expect;
	unsigned long long rnd;
};

static void check_unit(const struct units_run *r, const struct unit *u)
{
	size_t sz = r->c->obs_size;

	for (size_t j = 0; j < u->count; j++)
		check_bytes(r->c, (const unsigned char *)u->data + j * sz, u->idx[j]);
}

static void drop_unit(struct units_run *r, unsigned i, bool release)
{
	struct unit *u = &r->held[i];

	check_unit(r, u); /* unchanged while held */
	note_live(r->d, -(long)u->count);
	if (release)
		CHECK(eachobs_release(r->it, u->data) == 0, r->c, "release failed");
	free(u->idx);
	*u = r->held[--r->nheld];
}

/* Take one unit: 1, 0 at the end, or < 0 (with *fidx the failed index). */
static int take_unit(struct units_run *r, struct unit *u, size_t *fidx)
{
	int rc;

	if (r->c->o.batchsize) {
		eachobs_batch b;
		rc = next_batch_retry(r->it, &b);
		if (rc < 0 && b.idx)
			*fidx = b.idx[0];
		if (rc != 1)
			return rc;
		*u = (struct unit){ b.data, b.count, malloc(b.count * sizeof(size_t)) };
		CHECK(u->idx, r->c, "test out of memory");
		memcpy(u->idx, b.idx, b.count * sizeof(size_t));
		return 1;
	}
	size_t idx = 0;
	const void *obs;
	rc = next_retry(r->it, &obs, &idx);
	*fidx = idx;
	if (rc != 1)
		return rc;
	*u = (struct unit){ obs, 1, malloc(sizeof(size_t)) };
	CHECK(u->idx, r->c, "test out of memory");
	u->idx[0] = idx;
	return 1;
}

static void accept_unit(struct units_run *r, const struct unit *u)
{
	const struct cfg *c = r->c;
	size_t bs = c->o.batchsize ? c->o.batchsize : 1;

	CHECK(u->count >= 1 && u->count <= bs, c, "unit of %zu", u->count);
	for (size_t j = 0; j < u->count; j++) {
		size_t idx = u->idx[j];
		CHECK(idx < c->n && !r->seen[idx], c, "index %zu twice or out of range", idx);
		r->seen[idx] = 1;
		CHECK(idx != c->fail_at, c, "failed index %zu yielded", idx);
		CHECK(j == 0 || (idx > u->idx[j - 1] && idx / bs == u->idx[0] / bs),
		      c, "batch entries %zu, %zu", u->idx[j - 1], idx);
		if (r->expect == c->fail_at)
			r->expect++;
		if (c->o.ordered || c->o.executor == EACHOBS_SERIAL)
			CHECK(idx == r->expect, c, "index %zu, expected %zu", idx, r->expect);
		r->expect++;
	}
	check_unit(r, u);
	r->count += u->count;
}

static void run_units(int who, const struct cfg *c, struct ds *d,
		      eachobs_iter *it, struct interrupter *x)
{
	size_t npos = c->n, fidx = 0;
	struct units_run r = { c, d, it, NULL, 0, c->o.hold ? c->o.hold : 1,
			       calloc(c->n + 1, 1), 0, 0, c->seed };
	int rc = 0;

	if (c->o.batchsize && c->o.drop_last)
		npos -= c->n % c->o.batchsize;
	r.held = calloc(r.max, sizeof(*r.held));
	CHECK(r.seen && r.held, c, "test out of memory");
	while (r.count < c->close_after) {
		struct unit u;
		if (!c->o.hold && r.nheld)
			drop_unit(&r, 0, false);
		rc = take_unit(&r, &u, &fidx);
		if (rc == -ENOBUFS) {
			CHECK(r.nheld == r.max, c, "-ENOBUFS with %u held", r.nheld);
			drop_unit(&r, (unsigned)(next_rand(&r.rnd) % r.nheld), true);
			continue;
		}
		if (rc != 1)
			break;
		accept_unit(&r, &u);
		r.held[r.nheld++] = u;
		if (c->o.hold && next_rand(&r.rnd) % 2)
			drop_unit(&r, (unsigned)(next_rand(&r.rnd) % r.nheld), true);
		atomic_fetch_add(&progress[who], 1);
		if (c->consumer_us) {
			struct timespec work = { 0, c->consumer_us * 1000L };
			nanosleep(&work, NULL);
		}
	}
	interrupter_stop(x, c);
	bool skip = c->o.on_error == EACHOBS_ON_ERROR_SKIP;
	bool failed = c->fail_at < npos;
	if (r.count < c->close_after && (!failed || skip)) {
		size_t want = npos - failed;
		CHECK(rc == 0 && r.count == want, c, "ended with %d after %zu of %zu",
		      rc, r.count, want);
		CHECK(eachobs_failures(it, NULL, 0) == failed, c, "%zu failures counted",
		      eachobs_failures(it, NULL, 0));
	}
	CHECK(!skip || rc >= 0, c, "skip mode returned %d", rc);
	if (rc < 0 && failed)
		CHECK(rc == -EIO && fidx == c->fail_at, c, "error %d at %zu", rc, fidx);
	CHECK(rc != -EIO || failed, c, "-EIO without a failure");
	while (r.nheld)
		drop_unit(&r, 0, false);
	atomic_fetch_add(&total_observations, (long long)r.count);
	free(r.held);
	free(r.seen);
}

struct consumer_arg {
	int who;
	unsigned long long seed;
	long iterations;
	time_t deadline; /* soak mode: run until then; 0: count iterations */
	pthread_barrier_t *barrier;
};

static void *consumer_main(void *p)
{
	struct consumer_arg *a = p;
	unsigned long long s = a->seed;

	pthread_barrier_wait(a->barrier);
	for (long i = 0; a->deadline ? time(NULL) < a->deadline
				     : i < a->iterations;
	     i++) {
		struct cfg c = random_cfg(&s);
		if (c.o.executor != EACHOBS_SERIAL && c.o.nthreads == 0)
			c.o.nthreads = 2;
		run_one(a->who, &c);
	}
	return NULL;
}

/* Fails the run if no consumer made progress for 30 s. */
static void *watchdog(void *p)
{
	int nconsumers = *(int *)p;
	long long last = -1;

	for (;;) {
		sleep(30);
		long long sum = 0;
		for (int i = 0; i < nconsumers; i++)
			sum += atomic_load(&progress[i]);
		if (sum == last) {
			fprintf(stderr, "FAIL: no progress for 30 s; configs:\n");
			for (int i = 0; i < nconsumers; i++)
				print_cfg(stderr, &current[i]);
			_exit(1);
		}
		last = sum;
	}
	return NULL;
}

/* Run the one configuration a failure printed (its seed=...) again. */
static int replay(unsigned long long cfg_seed)
{
	unsigned long long s = cfg_seed;

	read_allowed_cpus();
	struct cfg c = random_cfg(&s);

	if (c.o.executor != EACHOBS_SERIAL && c.o.nthreads == 0)
		c.o.nthreads = 2;
	if (eachobs_pool_create(&shared_pool, 4) != 0)
		return 1;
	print_cfg(stdout, &c);
	run_one(0, &c);
	eachobs_pool_destroy(shared_pool);
	printf("stress_iter: replay ok\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "replay") == 0)
		return replay(strtoull(argv[2], NULL, 0));
	long iterations = argc > 1 ? atol(argv[1]) : 200;
	unsigned long long seed = argc > 2 ? strtoull(argv[2], NULL, 0) : 1;
	if (argc > 2 && strcmp(argv[2], "random") == 0) {
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		seed = ((unsigned long long)now.tv_sec * 1000000007ULL) ^
		       (unsigned long long)now.tv_nsec ^ (unsigned long long)getpid();
		seed %= 1000000000000ULL; /* short enough to retype */
		printf("stress_iter: seed %llu\n", seed);
		fflush(stdout);
	}
	int nconsumers = argc > 3 ? atoi(argv[3]) : 3;
	long seconds = argc > 4 ? atol(argv[4]) : 0;
	pthread_t th[64], wd;
	struct consumer_arg args[64];
	pthread_barrier_t barrier;

	if (iterations < 0 || nconsumers < 1 || nconsumers > 64 || seconds < 0) {
		fprintf(stderr,
			"usage: %s [ITERATIONS [SEED [CONSUMERS<=64 [SECONDS]]]]\n",
			argv[0]);
		return 2;
	}
	read_allowed_cpus();
	pthread_barrier_init(&barrier, NULL, (unsigned)nconsumers);
	/* Shared by every consumer: iterators borrow from it concurrently. */
	if (eachobs_pool_create(&shared_pool, 4) != 0) {
		fprintf(stderr, "eachobs_pool_create failed\n");
		return 1;
	}
	pthread_create(&wd, NULL, watchdog, &nconsumers);
	pthread_detach(wd);
	for (int i = 0; i < nconsumers; i++) {
		args[i] = (struct consumer_arg){
			i, seed * 1000003ULL + (unsigned)i, iterations / nconsumers,
			seconds ? time(NULL) + seconds : 0, &barrier
		};
		pthread_create(&th[i], NULL, consumer_main, &args[i]);
	}
	for (int i = 0; i < nconsumers; i++)
		pthread_join(th[i], NULL);
	eachobs_pool_destroy(shared_pool);
	printf("stress_iter: %lld iterators over %d consumer threads, seed %llu: "
	       "ok; %lld observations checked, %lld getobs failures injected\n",
	       atomic_load(&total_configs), nconsumers, seed,
	       atomic_load(&total_observations), atomic_load(&total_failures));
	return 0;
}
