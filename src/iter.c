/*
 * The public iterator: argument checks, defaults, start-up, eachobs_next
 * for each executor and ordering, and the close protocol.
 *
 * Close protocol: set `closing`, wake every sleeper (each wait tests
 * `closing`), join the workers, free. Workers test `closing` right before
 * every getobs and in every wait, so close returns once the getobs calls
 * already running have returned.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

_Static_assert(EACHOBS_MAX_CPU <= CPU_SETSIZE,
	       "worker_cpus entries must fit a cpu_set_t");

struct config {
	unsigned nthreads;  /* requested or derived */
	size_t buffersize;
	size_t stride;
};

static size_t ceil_div(size_t a, size_t b)
{
	return a / b + (a % b != 0);
}

static unsigned online_cpus(void)
{
	long c = sysconf(_SC_NPROCESSORS_ONLN);

	if (c < 1)
		return 1;
	return c > (long)EACHOBS_MAX_THREADS ? EACHOBS_MAX_THREADS
					     : (unsigned)c;
}

/* Everything that can be checked before numobs is called. */
static int check_args(eachobs_iter **it, const eachobs_dataset *data,
		      const eachobs_options *o, struct config *cfg)
{
	if (!it)
		return -EINVAL;
	*it = NULL;
	if (!data || !data->numobs || !data->getobs)
		return -EINVAL;
	if ((unsigned)o->executor > (unsigned)EACHOBS_SERIAL ||
	    (unsigned)o->on_error > (unsigned)EACHOBS_ON_ERROR_SKIP)
		return -EINVAL;
	if (o->nthreads > EACHOBS_MAX_THREADS)
		return -EINVAL;
	cfg->nthreads = o->nthreads ? o->nthreads : online_cpus();
	cfg->buffersize = o->buffersize;
	if (!cfg->buffersize) {
		cfg->buffersize = (size_t)EACHOBS_DEFAULT_BUFFER_PER_THREAD *
				  cfg->nthreads;
		if (cfg->buffersize < EACHOBS_DEFAULT_BUFFER_MIN)
			cfg->buffersize = EACHOBS_DEFAULT_BUFFER_MIN;
	}
	if (data->obs_size > SIZE_MAX - EACHOBS__CACHELINE)
		return -EINVAL;
	cfg->stride = (data->obs_size + EACHOBS__CACHELINE - 1) &
		      ~(size_t)(EACHOBS__CACHELINE - 1);
	if (o->executor == EACHOBS_SERIAL)
		return 0; /* one slot, no thread: the sizing options are ignored */
	if (o->stack_size && o->stack_size < (size_t)PTHREAD_STACK_MIN)
		return -EINVAL;
	if (o->worker_nice < 0 || o->worker_nice > 19)
		return -EINVAL;
	if (o->nworker_cpus && !o->worker_cpus)
		return -EINVAL;
	for (unsigned i = 0; i < o->nworker_cpus; i++)
		if (o->worker_cpus[i] >= EACHOBS_MAX_CPU)
			return -EINVAL;
	if (cfg->buffersize > EACHOBS_MAX_SLOTS ||
	    cfg->buffersize + cfg->nthreads + 1 > EACHOBS_MAX_SLOTS)
		return -EINVAL;
	if (cfg->stride &&
	    cfg->buffersize + cfg->nthreads + 1 > SIZE_MAX / cfg->stride)
		return -EINVAL;
	return 0;
}

/* Shape the run once n is known: task size, workers, slots. */
static unsigned plan(eachobs_iter *it, const eachobs_options *o,
		     const struct config *cfg)
{
	size_t os = o->oversubscription ? o->oversubscription
					: EACHOBS_DEFAULT_OVERSUBSCRIPTION;
	size_t n = it->n, workers;

	it->basesize = o->basesize;
	if (!it->basesize) {
		/* os * nthreads overflows only where size_t is 32 bits; one
		 * index per task is the limit it tends to anyway. */
		size_t tasks = os > SIZE_MAX / cfg->nthreads
				       ? SIZE_MAX
				       : os * cfg->nthreads;
		it->basesize = n ? ceil_div(n, tasks) : 1;
	}
	it->buffersize = cfg->buffersize;
	it->stride = cfg->stride;
	it->stack_size = o->stack_size ? o->stack_size
				       : EACHOBS_DEFAULT_STACK_SIZE;
	it->worker_nice = o->worker_nice;
	it->pin = o->nworker_cpus > 0;
	CPU_ZERO(&it->cpus);
	for (unsigned i = 0; i < o->nworker_cpus; i++)
		CPU_SET(o->worker_cpus[i], &it->cpus);
	if (it->executor == EACHOBS_SERIAL || n == 0) {
		it->nslots = 1;
		return 0;
	}
	if (it->ordered) {
		/* Chunks larger than the window's share per worker would
		 * leave workers waiting for room instead of loading. */
		size_t share = cfg->buffersize / (2 * (size_t)cfg->nthreads);
		size_t chunk = it->basesize < share ? it->basesize : share;
		eachobs__order_init(it, chunk ? chunk : 1);
		workers = ceil_div(n, it->order.chunk);
	} else {
		workers = ceil_div(n, it->basesize);
	}
	if (workers > cfg->nthreads)
		workers = cfg->nthreads;
	it->nslots = cfg->buffersize + workers + 1;
	return (unsigned)workers;
}

static int alloc_slots(eachobs_iter *it)
{
	it->slots = eachobs__alloc_aligned(it->nslots * sizeof(*it->slots));
	if (!it->slots)
		return -ENOMEM;
	/* Before anything can fail: close wakes every slot's event. */
	memset(it->slots, 0, it->nslots * sizeof(*it->slots));
	for (size_t i = 0; i < it->nslots; i++) {
		atomic_init(&it->slots[i].turn, 0);
		eachobs__event_init(&it->slots[i].ev);
	}
	it->mem = eachobs__alloc_aligned(it->nslots * it->stride);
	if (!it->mem)
		return -ENOMEM;
	for (size_t i = 0; i < it->nslots; i++)
		it->slots[i].data = it->mem + i * it->stride;
	return 0;
}

static void destroy(eachobs_iter *it)
{
	atomic_store(&it->closing, true);
	eachobs__pool_wake_all(it);
	eachobs__ring_wake_all(it);
	if (it->slots)
		eachobs__order_wake_all(it);
	eachobs__pool_join(it);
	eachobs__pool_fini(it);
	eachobs__ring_fini(it);
	eachobs__free(it->mem);
	eachobs__free(it->slots);
	eachobs__free(it);
}

static int start(eachobs_iter *it, unsigned workers)
{
	int rc = alloc_slots(it);

	if (rc == 0 && workers > 0 && !it->ordered)
		rc = eachobs__ring_init(it);
	if (rc == 0)
		rc = eachobs__pool_init(it, workers);
	if (rc == 0)
		rc = eachobs__pool_start(it);
	return rc;
}

int eachobs_parallel(eachobs_iter **itp, const eachobs_dataset *data,
		     const eachobs_options *opts)
{
	static const eachobs_options defaults;
	const eachobs_options *o = opts ? opts : &defaults;
	struct config cfg;
	int rc = check_args(itp, data, o, &cfg);

	if (rc < 0)
		return rc;
	eachobs_iter *it = eachobs__alloc_aligned(sizeof(*it));
	if (!it)
		return -ENOMEM;
	memset(it, 0, sizeof(*it));
	it->data = *data;
	it->executor = o->executor;
	it->ordered = o->ordered && o->executor != EACHOBS_SERIAL;
	it->skip_errors = o->on_error == EACHOBS_ON_ERROR_SKIP;
	eachobs__event_init(&it->pool.ev_go);
	eachobs__event_init(&it->ring.ev_ready);
	eachobs__event_init(&it->ring.ev_room);
	eachobs__event_init(&it->ring.ev_free);
	it->n = data->numobs(data->ctx);
	rc = start(it, plan(it, o, &cfg));
	if (rc < 0) {
		destroy(it);
		return rc;
	}
	*itp = it;
	return 0;
}

/* The iterator whose getobs runs on this thread, for eachobs_cancelled.
 * Saved and restored around each call, since a getobs may itself iterate
 * another iterator. */
static _Thread_local const eachobs_iter *loading;

bool eachobs_cancelled(void)
{
	return loading && eachobs__closing(loading);
}

void eachobs__load(eachobs_iter *it, struct eachobs__slot *slot, size_t idx)
{
	const eachobs_iter *outer = loading;

	struct eachobs__stats *st = eachobs__tls_stats;
	uint64_t t0 = eachobs__now_ns();

	loading = it;
	int rc = it->data.getobs(it->data.ctx, idx, slot->data);
	loading = outer;
	if (st) {
		eachobs__stat_add(&st->getobs_ns, eachobs__now_ns() - t0);
		eachobs__stat_add(&st->loaded, 1);
	}

	if (rc > 0)
		rc = -ERANGE;
	slot->idx = idx;
	slot->status = rc;
	if (rc == 0 || it->skip_errors)
		return;
	if (it->ordered)
		eachobs__order_fail(it, idx);
	else
		atomic_store_explicit(&it->stop, true, memory_order_relaxed);
}

/* What yield returns for a failure it skipped: the caller looks again. */
enum { SKIPPED = 2 };

static void give_back(eachobs_iter *it, struct eachobs__slot *slot)
{
	if (it->executor == EACHOBS_SERIAL)
		return;
	if (it->ordered)
		eachobs__order_release(it, slot);
	else
		eachobs__ring_put_free(it, slot);
}

static int fail(eachobs_iter *it, struct eachobs__slot *slot)
{
	if (it->skip_errors) {
		if (it->nfailures < EACHOBS_FAILURES_KEPT)
			it->failures[it->nfailures] = (eachobs_failure){
				slot->idx, slot->status
			};
		it->nfailures++;
		give_back(it, slot);
		return SKIPPED;
	}
	it->err = slot->status;
	it->err_idx = slot->idx;
	/* Ordered: nothing past this index is loaded any more, so the slot
	 * need not be given back. */
	if (!it->ordered)
		give_back(it, slot);
	return it->err;
}

/* Hand slot to the caller; a failure becomes the sticky error, or is
 * skipped. */
static int yield(eachobs_iter *it, struct eachobs__slot *slot,
		 const void **obs, size_t *idx)
{
	if (slot->status < 0) {
		int rc = fail(it, slot);
		if (idx && rc != SKIPPED)
			*idx = slot->idx;
		return rc;
	}
	if (idx)
		*idx = slot->idx;
	it->held = slot;
	if (obs)
		*obs = slot->data;
	return 1;
}

static int next_serial(eachobs_iter *it, const void **obs, size_t *idx)
{
	int rc = SKIPPED;

	while (rc == SKIPPED && it->yielded < it->n) {
		eachobs__load(it, &it->slots[0], it->yielded++);
		rc = yield(it, &it->slots[0], obs, idx);
	}
	return rc == SKIPPED ? 0 : rc;
}

static int next_ordered(eachobs_iter *it, const void **obs, size_t *idx)
{
	struct eachobs__slot *slot;
	int rc = SKIPPED;

	if (it->held)
		eachobs__order_release(it, it->held);
	it->held = NULL;
	while (rc == SKIPPED) {
		if (eachobs__order_next(it, &slot) == 0)
			return 0;
		rc = yield(it, slot, obs, idx);
	}
	return rc;
}

/* THREADED consumer with nothing ready: load one pending index itself. */
static struct eachobs__slot *help_unordered(eachobs_iter *it)
{
	struct eachobs__slot *slot;
	size_t idx;

	if (atomic_load_explicit(&it->stop, memory_order_relaxed))
		return NULL;
	slot = eachobs__ring_try_get_free(it);
	if (!slot)
		return NULL;
	if (!eachobs__pool_take_one(it, &idx)) {
		eachobs__ring_put_free(it, slot);
		return NULL;
	}
	eachobs__load(it, slot, idx);
	return slot;
}

static int next_unordered(eachobs_iter *it, const void **obs, size_t *idx)
{
	if (it->held)
		eachobs__ring_put_free(it, it->held);
	it->held = NULL;
	for (;;) {
		if (it->yielded == it->n)
			return 0;
		struct eachobs__slot *slot = eachobs__ring_get_ready(it);
		if (!slot && it->executor == EACHOBS_THREADED)
			slot = help_unordered(it);
		if (slot) {
			it->yielded++;
			int rc = yield(it, slot, obs, idx);
			if (rc != SKIPPED)
				return rc;
			continue;
		}
		eachobs__ring_wait_ready(it);
	}
}

static int next(eachobs_iter *it, const void **obs, size_t *idx)
{
	if (it->err) {
		if (idx)
			*idx = it->err_idx;
		return it->err;
	}
	if (it->executor == EACHOBS_SERIAL)
		return next_serial(it, obs, idx);
	if (it->ordered)
		return next_ordered(it, obs, idx);
	return next_unordered(it, obs, idx);
}

int eachobs_next(eachobs_iter *it, const void **obs, size_t *idx)
{
	if (obs)
		*obs = NULL;
	if (!it)
		return -EINVAL;
	/* Restored on return: a getobs may itself run an iterator. */
	struct eachobs__stats *outer = eachobs__tls_stats;
	eachobs__tls_stats = &it->cstats;
	int rc = next(it, obs, idx);
	eachobs__tls_stats = outer;
	it->nyielded += rc == 1;
	return rc;
}

static uint64_t stat(const _Atomic uint64_t *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

int eachobs_get_stats(const eachobs_iter *it, eachobs_stats *st)
{
	if (!it || !st)
		return -EINVAL;
	memset(st, 0, sizeof(*st));
	st->yielded = it->nyielded;
	st->skipped = it->nfailures;
	st->loaded_by_consumer = stat(&it->cstats.loaded);
	st->consumer_wait_ns = stat(&it->cstats.idle_ns);
	st->consumer_getobs_ns = stat(&it->cstats.getobs_ns);
	st->loaded = st->loaded_by_consumer;
	for (unsigned j = 0; j < it->pool.nstarted; j++) {
		const struct eachobs__stats *w = &it->pool.workers[j].stats;
		st->loaded += stat(&w->loaded);
		st->worker_getobs_ns += stat(&w->getobs_ns);
		st->worker_idle_ns += stat(&w->idle_ns);
		st->steals += stat(&w->steals);
	}
	st->max_waiting = it->max_waiting;
	st->nworkers = it->pool.nstarted;
	return 0;
}

size_t eachobs_failures(const eachobs_iter *it, eachobs_failure *out,
			size_t max)
{
	if (!it)
		return 0;
	size_t kept = it->nfailures < EACHOBS_FAILURES_KEPT
			      ? it->nfailures
			      : EACHOBS_FAILURES_KEPT;
	for (size_t i = 0; i < kept && i < max; i++)
		out[i] = it->failures[i];
	return it->nfailures;
}

void eachobs_close(eachobs_iter *it)
{
	if (it)
		destroy(it);
}
