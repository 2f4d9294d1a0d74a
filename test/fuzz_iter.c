/*
 * libFuzzer harness: the fuzzer's bytes choose the options and a dataset's
 * behaviour, and every promise of include/eachobs.h that can be checked from
 * outside is checked for that input:
 *
 *   - eachobs_parallel returns -EINVAL exactly for the invalid arguments the
 *     header lists (out-of-range executor, on_error, nthreads, worker_nice,
 *     stack_size, worker CPUs, slot count), 0 otherwise (-EAGAIN only for a
 *     worker CPU the system cannot use), and leaves *it NULL on failure;
 *   - every index is yielded at most once, and all of them when nothing
 *     fails and nothing closes early; in index order when ordered or SERIAL;
 *   - the slot is 64-byte aligned, holds what getobs wrote, stays unchanged
 *     until the next call, and no more than buffersize + nthreads + 1
 *     distinct slots are ever handed to getobs (1 for SERIAL);
 *   - a failing getobs is reported with its code (-ERANGE for a positive
 *     one) and index, after every lower index when ordered, and sticks;
 *     under SKIP it is counted and kept by eachobs_failures instead;
 *   - getobs runs at most once per index and never after close, and close
 *     joins every thread;
 *   - nothing leaks (LeakSanitizer, run by libFuzzer after each input).
 *
 * Build and run with tools/fuzz.sh. A crash leaves the input in the working
 * directory; `fuzz_iter FILE` runs that input again.
 */
#define _GNU_SOURCE
#include "eachobs.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_N 3000
#define MAX_FAILS 4

/* The fuzzer's bytes, read front to back; zeros once they run out. */
struct bytes {
	const uint8_t *p;
	size_t len;
};

static unsigned take(struct bytes *b)
{
	if (!b->len)
		return 0;
	b->len--;
	return *b->p++;
}

static unsigned take16(struct bytes *b)
{
	return take(b) | take(b) << 8;
}

/* What the input asks for. */
struct plan {
	eachobs_options o;
	unsigned cpus[2];
	size_t n, obs_size, close_after;
	size_t fail_idx[MAX_FAILS];
	int fail_code[MAX_FAILS];
	unsigned nfail;
	size_t fail_every, fail_rest; /* also fail idx % every == rest */
	int every_code;
	unsigned yield_mod; /* getobs yields the CPU when idx % yield_mod == 0 */
	int null_arg;       /* 1..4: pass a NULL it, data, numobs or getobs */
	int null_opts;
};

struct ds {
	const struct plan *p;
	atomic_uchar calls[MAX_N];
	atomic_int closed;
	pthread_mutex_t lock; /* guards slots */
	const void *slots[4096];
	size_t nslots;
	int slot_overflow;
};

#define CHECK(cond, ...)                                                   \
	do {                                                               \
		if (!(cond)) {                                             \
			fprintf(stderr, "fuzz_iter: %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                      \
			fprintf(stderr, "\n");                             \
			abort();                                           \
		}                                                          \
	} while (0)

static unsigned char pattern(size_t idx, size_t byte)
{
	return (unsigned char)(idx * 131 + byte * 7 + 1);
}

/* The code getobs returns for idx; 0 when it succeeds. */
static int code_of(const struct plan *p, size_t idx)
{
	for (unsigned i = 0; i < p->nfail; i++)
		if (p->fail_idx[i] == idx)
			return p->fail_code[i];
	if (p->fail_every && idx % p->fail_every == p->fail_rest)
		return p->every_code;
	return 0;
}

/* The code eachobs reports for a getobs result. */
static int reported(int code)
{
	return code > 0 ? -ERANGE : code;
}

static size_t numobs(void *ctx)
{
	return ((struct ds *)ctx)->p->n;
}

static void note_slot(struct ds *d, const void *obs)
{
	pthread_mutex_lock(&d->lock);
	size_t i = 0;
	while (i < d->nslots && d->slots[i] != obs)
		i++;
	if (i == d->nslots) {
		if (d->nslots < sizeof(d->slots) / sizeof(d->slots[0]))
			d->slots[d->nslots++] = obs;
		else
			d->slot_overflow = 1;
	}
	pthread_mutex_unlock(&d->lock);
}

static int getobs(void *ctx, size_t idx, void *obs)
{
	struct ds *d = ctx;
	const struct plan *p = d->p;

	CHECK(!atomic_load(&d->closed), "getobs(%zu) after close", idx);
	CHECK(idx < p->n, "getobs(%zu) with n = %zu", idx, p->n);
	CHECK(atomic_fetch_add(&d->calls[idx], 1) == 0, "getobs(%zu) twice", idx);
	CHECK(obs && (uintptr_t)obs % 64 == 0, "slot %p not 64-byte aligned", obs);
	note_slot(d, obs);
	if (p->yield_mod && idx % p->yield_mod == 0)
		sched_yield();
	for (size_t b = 0; b < p->obs_size; b++)
		((unsigned char *)obs)[b] = pattern(idx, b);
	return code_of(p, idx);
}

static void check_bytes(const struct plan *p, const void *obs, size_t idx)
{
	const unsigned char *c = obs;

	for (size_t b = 0; b < p->obs_size; b++)
		CHECK(c[b] == pattern(idx, b), "slot of %zu byte %zu changed", idx, b);
}

static int threads_now(void)
{
	DIR *dir = opendir("/proc/self/task");
	struct dirent *e;
	int k = 0;

	if (!dir)
		return -1;
	while ((e = readdir(dir)) != NULL)
		k += e->d_name[0] != '.';
	closedir(dir);
	return k;
}

static unsigned online(void)
{
	return (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
}

/* nthreads with 0 resolved to every online CPU. */
static size_t resolved(unsigned nthreads)
{
	return nthreads ? nthreads : online();
}

/*
 * The thread count, once it is down to want or after a second: a joined
 * thread can stay listed in /proc for a moment after pthread_join returns.
 */
static int threads_settle(int want)
{
	struct timespec pause = { 0, 1000000 };
	int k;

	for (int i = 0; (k = threads_now()) > want && i < 1000; i++)
		nanosleep(&pause, NULL);
	return k;
}

static void decode(struct bytes *b, struct plan *p)
{
	/* PTHREAD_STACK_MIN is a sysconf call with _GNU_SOURCE. */
	const size_t stacks[] = { 0, 1, (size_t)PTHREAD_STACK_MIN - 1,
				  (size_t)PTHREAD_STACK_MIN, 64 << 10, 256 << 10 };
	static const int nices[] = { 0, 1, 19, -1, 20, INT_MIN };
	unsigned v;

	memset(p, 0, sizeof(*p));
	v = take(b);
	p->o.nthreads = v == 255 ? EACHOBS_MAX_THREADS + 1 : v % 17;
	v = take(b);
	/* Too many slots: -EINVAL (a valid count that large would take
	 * gigabytes; the unit tests cover the exact boundary). */
	p->o.buffersize = v == 255   ? (size_t)EACHOBS_MAX_SLOTS + 1
			  : v == 254 ? SIZE_MAX
			  : v == 253 ? (size_t)EACHOBS_MAX_SLOTS - resolved(p->o.nthreads)
				     : v % 70;
	v = take(b);
	p->o.basesize = v == 255 ? SIZE_MAX : v % 40;
	v = take(b);
	p->o.oversubscription = v == 255 ? UINT_MAX : v % 20;
	v = take(b);
	p->o.executor = v == 255 ? (eachobs_executor)-1 : (eachobs_executor)(v % 5);
	p->o.ordered = take(b) & 1;
	v = take(b);
	p->o.on_error = (eachobs_on_error)(v % 3);
	p->o.stack_size = stacks[take(b) % 6];
	p->o.worker_nice = nices[take(b) % 6];
	switch (take(b) % 8) {
	case 1: /* a CPU that exists */
		p->cpus[0] = 0;
		p->o.worker_cpus = p->cpus;
		p->o.nworker_cpus = 1;
		break;
	case 2: /* a valid number the system cannot use: -EAGAIN at start */
		p->cpus[0] = EACHOBS_MAX_CPU - 1;
		p->o.worker_cpus = p->cpus;
		p->o.nworker_cpus = 1;
		break;
	case 3: /* out of range: -EINVAL */
		p->cpus[0] = 0;
		p->cpus[1] = EACHOBS_MAX_CPU;
		p->o.worker_cpus = p->cpus;
		p->o.nworker_cpus = 2;
		break;
	case 4: /* NULL with a count: -EINVAL */
		p->o.nworker_cpus = 1;
		break;
	}
	v = take16(b);
	p->n = v % 8 == 0 ? v % (MAX_N + 1) : v % 65; /* mostly small */
	p->obs_size = take(b) % 4 ? take(b) % 65 : take(b) + 1; /* 0..256 */
	v = take(b);
	p->close_after = v < 200 ? SIZE_MAX : (size_t)(v - 200) * p->n / 55;
	p->nfail = take(b) % (MAX_FAILS + 1);
	for (unsigned i = 0; i < p->nfail; i++) {
		p->fail_idx[i] = p->n ? take16(b) % p->n : 0;
		v = take(b);
		p->fail_code[i] = v < 200 ? -(int)(v % 133) - 1 : (int)(v - 199);
	}
	v = take(b);
	if (v >= 200 && p->n) {
		p->fail_every = 1 + v % 7;
		p->fail_rest = take(b) % p->fail_every;
		p->every_code = -EBADMSG;
	}
	p->yield_mod = take(b) % 8;
	v = take(b);
	p->null_arg = v >= 250 ? (int)(v - 249) : 0; /* 1..6; 5, 6: none */
	p->null_opts = take(b) == 255;
}

/* The code eachobs_parallel must return for the plan, by the header. */
static int expected_start(const struct plan *p)
{
	const eachobs_options *o = &p->o;

	if (p->null_arg >= 1 && p->null_arg <= 4)
		return -EINVAL;
	if (p->null_opts)
		return 0;
	if ((unsigned)o->executor > EACHOBS_SERIAL ||
	    (unsigned)o->on_error > EACHOBS_ON_ERROR_SKIP ||
	    o->nthreads > EACHOBS_MAX_THREADS)
		return -EINVAL;
	if (o->executor == EACHOBS_SERIAL)
		return 0; /* the sizing and placement options are ignored */
	if (o->stack_size && o->stack_size < (size_t)PTHREAD_STACK_MIN)
		return -EINVAL;
	if (o->worker_nice < 0 || o->worker_nice > 19)
		return -EINVAL;
	if (o->nworker_cpus && !o->worker_cpus)
		return -EINVAL;
	for (unsigned i = 0; i < o->nworker_cpus; i++)
		if (o->worker_cpus[i] >= EACHOBS_MAX_CPU)
			return -EINVAL;
	if (o->buffersize > EACHOBS_MAX_SLOTS ||
	    o->buffersize + resolved(o->nthreads) + 1 > EACHOBS_MAX_SLOTS)
		return -EINVAL;
	if (o->nworker_cpus && o->worker_cpus[0] == EACHOBS_MAX_CPU - 1 && p->n)
		return -EAGAIN;
	return 0;
}

/* The options in effect: all-zero when the input passes NULL. */
static eachobs_options effective(const struct plan *p)
{
	return p->null_opts ? (eachobs_options){ 0 } : p->o;
}

/* buffersize + nthreads + 1, with the defaults resolved. */
static size_t slot_bound(const struct plan *p)
{
	eachobs_options o = effective(p);
	size_t t = resolved(o.nthreads);
	size_t b = o.buffersize;

	if (o.executor == EACHOBS_SERIAL)
		return 1;
	if (!b) {
		b = EACHOBS_DEFAULT_BUFFER_PER_THREAD * t;
		if (b < EACHOBS_DEFAULT_BUFFER_MIN)
			b = EACHOBS_DEFAULT_BUFFER_MIN;
	}
	return b + t + 1;
}

static void iterate(struct ds *d, eachobs_iter *it)
{
	const struct plan *p = d->p;
	eachobs_options o = effective(p);
	bool ordered = o.ordered || o.executor == EACHOBS_SERIAL;
	bool skip = o.on_error == EACHOBS_ON_ERROR_SKIP;
	static unsigned char seen[MAX_N];
	const void *obs = NULL, *prev = NULL;
	size_t idx = SIZE_MAX, prev_idx = 0, count = 0, expect = 0, nfailed = 0;
	int rc = 1;

	memset(seen, 0, p->n);
	for (size_t i = 0; i < p->n; i++)
		nfailed += code_of(p, i) != 0;
	while (count < p->close_after) {
		if (prev)
			check_bytes(p, prev, prev_idx);
		rc = eachobs_next(it, &obs, &idx);
		if (rc != 1)
			break;
		CHECK(idx < p->n && !seen[idx], "index %zu twice or out of range", idx);
		seen[idx] = 1;
		CHECK(code_of(p, idx) == 0, "failed index %zu yielded", idx);
		while (expect < p->n && code_of(p, expect))
			expect++; /* skipped; under STOP the error came first */
		if (ordered)
			CHECK(idx == expect, "index %zu, expected %zu", idx, expect);
		expect++;
		check_bytes(p, obs, idx);
		prev = obs;
		prev_idx = idx;
		count++;
	}
	CHECK(eachobs_cancelled() == false, "cancelled outside getobs");
	if (count < p->close_after && rc != 1) {
		if (skip || nfailed == 0) {
			eachobs_failure kept[EACHOBS_FAILURES_KEPT];
			size_t nk;

			CHECK(rc == 0, "ended with %d (%s)", rc, eachobs_strerror(rc));
			CHECK(count == p->n - nfailed, "%zu of %zu yielded", count,
			      p->n - nfailed);
			CHECK(eachobs_next(it, &obs, &idx) == 0 && obs == NULL,
			      "end is not sticky");
			nk = eachobs_failures(it, kept, EACHOBS_FAILURES_KEPT);
			CHECK(nk == (skip ? nfailed : 0), "%zu failures counted, %zu made",
			      nk, nfailed);
			for (size_t i = 0; i < nk && i < EACHOBS_FAILURES_KEPT; i++) {
				CHECK(kept[i].idx < p->n &&
					      kept[i].code == reported(code_of(p, kept[i].idx)) &&
					      code_of(p, kept[i].idx),
				      "failure %zu: index %zu code %d", i, kept[i].idx,
				      kept[i].code);
				CHECK(!ordered || i == 0 || kept[i].idx > kept[i - 1].idx,
				      "ordered failures out of order");
			}
			eachobs_stats st;
			CHECK(eachobs_get_stats(it, &st) == 0, "get_stats");
			CHECK(st.yielded == count, "stats: %llu yielded, %zu seen",
			      st.yielded, count);
			CHECK(st.skipped == (skip ? nfailed : 0), "stats: %llu skipped",
			      st.skipped);
		} else {
			size_t again = SIZE_MAX;
			const void *o2 = &again;

			CHECK(rc < 0, "eachobs_next returned %d", rc);
			CHECK(idx < p->n && code_of(p, idx) && rc == reported(code_of(p, idx)),
			      "error %d at index %zu, which returns %d", rc, idx,
			      idx < p->n ? code_of(p, idx) : 0);
			if (ordered) {
				size_t first = 0;
				while (!code_of(p, first))
					first++;
				CHECK(idx == first && count == first,
				      "ordered error at %zu after %zu, first failure %zu",
				      idx, count, first);
			}
			CHECK(eachobs_next(it, &o2, &again) == rc && again == idx &&
				      o2 == NULL,
			      "error is not sticky");
			CHECK(eachobs_failures(it, NULL, 0) == 0, "STOP counted failures");
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ds d;
	struct bytes b = { data, size };
	struct plan p;
	eachobs_iter *it = (eachobs_iter *)&d; /* must be set to NULL */
	int base = threads_now();

	decode(&b, &p);
	memset(&d, 0, sizeof(d));
	d.p = &p;
	pthread_mutex_init(&d.lock, NULL);
	eachobs_dataset ds = { &d, numobs, getobs, p.obs_size };
	switch (p.null_arg) {
	case 3: ds.numobs = NULL; break;
	case 4: ds.getobs = NULL; break;
	}
	int want = expected_start(&p);
	int rc = eachobs_parallel(p.null_arg == 1 ? NULL : &it,
				  p.null_arg == 2 ? NULL : &ds,
				  p.null_opts ? NULL : &p.o);
	CHECK(rc == want, "eachobs_parallel returned %d (%s), expected %d", rc,
	      eachobs_strerror(rc), want);
	CHECK(eachobs_strerror(rc) != NULL, "strerror(%d) is NULL", rc);
	if (rc < 0) {
		CHECK(p.null_arg == 1 || it == NULL, "*it not NULL after failure");
		for (size_t i = 0; i < p.n; i++)
			CHECK(!atomic_load(&d.calls[i]), "getobs ran, start failed");
		CHECK(threads_settle(base) == base, "threads left after a failed start");
		pthread_mutex_destroy(&d.lock);
		return 0;
	}
	iterate(&d, it);
	eachobs_close(it);
	atomic_store(&d.closed, 1);
	CHECK(threads_settle(base) == base, "%d threads after close, %d before",
	      threads_now(), base);
	if (!d.slot_overflow)
		CHECK(d.nslots <= slot_bound(&p), "%zu slots used, bound %zu",
		      d.nslots, slot_bound(&p));
	CHECK(eachobs_next(NULL, NULL, NULL) == -EINVAL, "next(NULL)");
	eachobs_close(NULL);
	pthread_mutex_destroy(&d.lock);
	return 0;
}
