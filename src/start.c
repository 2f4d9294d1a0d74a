/*
 * Starting and stopping an iterator: argument checks, defaults, the plan
 * (units, workers, slots), allocation, start-up, and the close protocol.
 *
 * Close protocol: set `closing` (eachobs_cancelled's answer), lower the
 * halt word to 0, wake every sleeper (each wait tests the halt word, the
 * start gate `closing`), join the workers, free. Loaders test the halt
 * word right before every getobs, so close returns once the getobs calls
 * already running have returned.
 */
#define _GNU_SOURCE
#include "internal.h"
#include "stream.h"
#include "tune.h"

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
	size_t buffersize;  /* units */
	size_t consumer;    /* units the consumer may hold: max(1, hold) */
	size_t cap;         /* observations per unit */
	size_t buf_bytes;   /* bytes of one unit, rounded up to 64 */
	bool autotune;      /* nthreads is a bound (not under SERIAL) */
	struct eachobs__layout layout; /* where its fields lie */
};

static size_t ceil_div(size_t a, size_t b)
{
	return a / b + (a % b != 0);
}

/* nthreads = 0 without a pool: the CPUs this process may use (cpus.c).
 * SERIAL starts no thread, so it does not pay for reading them. */
static unsigned default_threads(const eachobs_options *o)
{
	return o->executor == EACHOBS_SERIAL ? 1 : eachobs__default_threads();
}

/* nthreads = 0 under autotune without a pool: enough for a getobs that
 * waits, whatever the CPUs. */
static unsigned autotune_bound(void)
{
	unsigned cpus = eachobs__default_threads();
	unsigned n = cpus > EACHOBS_AUTOTUNE_THREADS ? cpus
						     : EACHOBS_AUTOTUNE_THREADS;

	return n > EACHOBS_MAX_THREADS ? EACHOBS_MAX_THREADS : n;
}

static size_t default_buffersize(const eachobs_options *o, unsigned nthreads,
				 size_t unit_bytes)
{
	size_t per = o->batchsize ? EACHOBS_DEFAULT_BATCH_BUFFER_PER_THREAD
				  : EACHOBS_DEFAULT_BUFFER_PER_THREAD;
	size_t min = o->batchsize ? EACHOBS_DEFAULT_BATCH_BUFFER_MIN
				  : EACHOBS_DEFAULT_BUFFER_MIN;
	size_t b = per * nthreads;

	if (b < min)
		b = min;
	/* Small observations: a buffer of EACHOBS_DEFAULT_BUFFER_BYTES costs
	 * nothing and saves wake-ups (see eachobs_options.buffersize). */
	size_t cheap = EACHOBS_DEFAULT_BUFFER_BYTES /
		       (unit_bytes > EACHOBS__CACHELINE ? unit_bytes
							: EACHOBS__CACHELINE);
	size_t most = o->ordered && !o->batchsize
			      ? EACHOBS_DEFAULT_ORDERED_BUFFER_MAX
			      : EACHOBS_DEFAULT_BUFFER_MAX;
	if (cheap > most)
		cheap = most;
	return b < cheap ? cheap : b;
}

/* The sizes of one unit's memory, or -EINVAL when they overflow. */
static int unit_size(size_t obs_size, const eachobs_options *o,
		     struct config *cfg)
{
	if (o->batchsize > EACHOBS_MAX_BATCHSIZE)
		return eachobs__fail(-EINVAL,
				     "batchsize %zu exceeds EACHOBS_MAX_BATCHSIZE "
				     "(%zu)",
				     o->batchsize, EACHOBS_MAX_BATCHSIZE);
	cfg->cap = o->batchsize ? o->batchsize : 1;
	if (eachobs__layout_init(&cfg->layout, obs_size, o->fields,
				 o->nfields, cfg->cap) < 0)
		return -EINVAL;
	cfg->buf_bytes = cfg->layout.bytes;
	cfg->consumer = o->hold ? o->hold : 1;
	return 0;
}

/* Memory for units buffers (data, idx, len, status) must be countable. */
static bool fits(const struct config *cfg, size_t units)
{
	size_t meta = 2 * sizeof(size_t) + sizeof(int);

	if (units > EACHOBS_MAX_SLOTS)
		return false;
	if (cfg->buf_bytes && units > SIZE_MAX / cfg->buf_bytes)
		return false;
	return units <= SIZE_MAX / meta / cfg->cap;
}

/* What fits() found wrong with units slots (failure path only). */
static int slots_fail(const struct config *cfg, const eachobs_options *o,
		      size_t obs_size, size_t units)
{
	if (units > EACHOBS_MAX_SLOTS)
		return eachobs__fail(-EINVAL,
				     "buffersize %zu + nthreads %u + max(1, hold "
				     "%u) = %zu slots exceed EACHOBS_MAX_SLOTS "
				     "(%u)",
				     cfg->buffersize, cfg->nthreads, o->hold,
				     units, EACHOBS_MAX_SLOTS);
	return eachobs__fail(-EINVAL,
			     "data->obs_size %zu with batchsize %zu: %zu slots "
			     "of %zu bytes overflow size_t",
			     obs_size, o->batchsize, units, cfg->buf_bytes);
}

/* The options, for units of obs_size bytes. */
static int check_options(const eachobs_options *o, size_t obs_size,
			 struct config *cfg)
{
	if (!o->resume != !o->resume_len)
		return eachobs__fail(-EINVAL,
				     "resume %s with resume_len %zu",
				     o->resume ? "is set" : "is NULL",
				     o->resume_len);
	if (o->allocator && (!o->allocator->alloc || !o->allocator->free))
		return eachobs__fail(-EINVAL, "allocator->%s is NULL",
				     o->allocator->alloc ? "free" : "alloc");
	if ((unsigned)o->executor > (unsigned)EACHOBS_SERIAL)
		return eachobs__fail(-EINVAL,
				     "executor %d is not an eachobs_executor",
				     (int)o->executor);
	if ((unsigned)o->on_error > (unsigned)EACHOBS_ON_ERROR_SKIP)
		return eachobs__fail(-EINVAL,
				     "on_error %d is not an eachobs_on_error",
				     (int)o->on_error);
	if (o->nthreads > EACHOBS_MAX_THREADS)
		return eachobs__fail(-EINVAL,
				     "nthreads %u exceeds EACHOBS_MAX_THREADS "
				     "(%u)",
				     o->nthreads, EACHOBS_MAX_THREADS);
	if (o->hold > EACHOBS_MAX_SLOTS)
		return eachobs__fail(-EINVAL,
				     "hold %u exceeds EACHOBS_MAX_SLOTS (%u)",
				     o->hold, EACHOBS_MAX_SLOTS);
	if (unit_size(obs_size, o, cfg) < 0)
		return -EINVAL;
	cfg->autotune = o->autotune && o->executor != EACHOBS_SERIAL;
	cfg->nthreads = o->nthreads ? o->nthreads
		      : o->pool	 ? eachobs__lender_size(o->pool)
		      : cfg->autotune ? autotune_bound()
				 : default_threads(o);
	cfg->buffersize = o->buffersize ? o->buffersize
					: default_buffersize(o, cfg->nthreads,
							     cfg->buf_bytes);
	if (o->executor == EACHOBS_SERIAL)
		return fits(cfg, cfg->consumer) ? 0
						: slots_fail(cfg, o, obs_size,
							     cfg->consumer);
	if (o->stack_size && o->stack_size < (size_t)PTHREAD_STACK_MIN)
		return eachobs__fail(-EINVAL,
				     "stack_size %zu is below PTHREAD_STACK_MIN "
				     "(%zu)",
				     o->stack_size, (size_t)PTHREAD_STACK_MIN);
	if (o->worker_nice < 0 || o->worker_nice > 19)
		return eachobs__fail(-EINVAL,
				     "worker_nice %d is outside 0..19",
				     o->worker_nice);
	if (o->nworker_cpus && !o->worker_cpus)
		return eachobs__fail(-EINVAL,
				     "worker_cpus is NULL with nworker_cpus %u",
				     o->nworker_cpus);
	for (unsigned i = 0; i < o->nworker_cpus; i++)
		if (o->worker_cpus[i] >= EACHOBS_MAX_CPU)
			return eachobs__fail(-EINVAL,
					     "worker_cpus[%u] = %u is not below "
					     "EACHOBS_MAX_CPU (%u)",
					     i, o->worker_cpus[i],
					     EACHOBS_MAX_CPU);
	if (cfg->buffersize > EACHOBS_MAX_SLOTS)
		return eachobs__fail(-EINVAL,
				     "buffersize %zu exceeds EACHOBS_MAX_SLOTS "
				     "(%u)",
				     cfg->buffersize, EACHOBS_MAX_SLOTS);
	if (!fits(cfg, cfg->buffersize + cfg->nthreads + cfg->consumer))
		return slots_fail(cfg, o, obs_size,
				  cfg->buffersize + cfg->nthreads +
					  cfg->consumer);
	return 0;
}

/* Everything that can be checked before numobs is called. */
static int check_args(eachobs_iter **it, const eachobs_dataset *data,
		      const eachobs_options *o, struct config *cfg)
{
	if (!it)
		return eachobs__fail(-EINVAL, "eachobs_parallel: it is NULL");
	*it = NULL;
	if (!data)
		return eachobs__fail(-EINVAL, "eachobs_parallel: data is NULL");
	if (!data->numobs)
		return eachobs__fail(-EINVAL, "data->numobs is NULL");
	if (!data->getobs)
		return eachobs__fail(-EINVAL, "data->getobs is NULL");
	return check_options(o, data->obs_size, cfg);
}

/* Units per task: basesize observations, rounded up to whole units. */
static size_t task_units(const eachobs_iter *it, const eachobs_options *o,
			 unsigned nthreads)
{
	size_t os = o->oversubscription ? o->oversubscription
					: EACHOBS_DEFAULT_OVERSUBSCRIPTION;

	if (o->basesize)
		return ceil_div(o->basesize, it->cap);
	/* os * nthreads overflows only where size_t is 32 bits; one unit per
	 * task is the limit it tends to anyway. */
	size_t tasks = os > SIZE_MAX / nthreads ? SIZE_MAX : os * nthreads;
	return it->nunits ? ceil_div(it->nunits, tasks) : 1;
}

/* What makes the iteration order: a checkpoint resumes only under the
 * same. seed and epoch count only when shuffling, shard_index only when
 * sharding: elsewhere they change nothing. */
static uint64_t order_hash(const eachobs_options *o)
{
	uint64_t v[] = { o->indices ? o->nindices : UINT64_MAX,
			 o->shuffle,
			 o->shuffle ? o->seed : 0,
			 o->shuffle ? o->epoch : 0,
			 o->shard_count > 1 ? o->shard_index : 0,
			 o->shard_count > 1 ? o->shard_count : 1,
			 o->batchsize,
			 o->drop_last };
	uint64_t h = eachobs__fnv(EACHOBS__FNV_BASIS, v, sizeof(v));

	if (o->indices)
		h = eachobs__fnv(h, o->indices, o->nindices * sizeof(size_t));
	return h;
}

/* The units of the iteration: all of the order's, or, resuming, those the
 * checkpoint left (then it->nunits counts those). */
static int plan_units(eachobs_iter *it, const eachobs_options *o,
		      const struct config *cfg)
{
	it->batchsize = o->batchsize;
	it->cap = cfg->cap;
	it->npos = eachobs__sampler_len(&it->sampler);
	if (o->batchsize && o->drop_last)
		it->npos -= it->npos % o->batchsize;
	it->nunits = ceil_div(it->npos, it->cap);
	it->key = (struct eachobs__ckpt_key){ it->n, it->npos, it->nunits,
					      o->batchsize, order_hash(o) };
	if (!o->resume)
		return 0;
	int rc = eachobs__ckpt_read(&it->key, o->resume, o->resume_len,
				    &it->remap);
	if (rc == -EINVAL)
		return eachobs__fail(rc, "resume: the %zu bytes are not a "
				     "checkpoint of this iteration (damaged, "
				     "truncated, or taken with another numobs "
				     "or other order options)", o->resume_len);
	if (rc < 0)
		return eachobs__fail(rc, "resume: out of memory for the "
				     "checkpoint's %zu bytes", o->resume_len);
	it->resumed = true;
	it->nunits = it->remap.total;
	return 0;
}

/* Ordered with hold, the consumer's items are spares swapped in
 * (hold.c); streams give each slot back instead. */
static bool hold_swaps(const eachobs_iter *it)
{
	return it->ordered && it->mode == &eachobs__ordered_mode;
}

/* What every mode's workers and units need. */
static void plan_threads(eachobs_iter *it, const eachobs_options *o,
			 const struct config *cfg)
{
	it->buf_bytes = cfg->buf_bytes;
	it->layout = cfg->layout;
	it->stack_size = o->stack_size ? o->stack_size
				       : EACHOBS_DEFAULT_STACK_SIZE;
	it->worker_nice = o->worker_nice;
	/* SERIAL ignores placement, and check_args did not look at it: the
	 * list may be NULL or out of range (found by test/fuzz_iter.c). */
	it->pin = o->nworker_cpus > 0 && o->executor != EACHOBS_SERIAL;
	CPU_ZERO(&it->cpus);
	for (unsigned i = 0; it->pin && i < o->nworker_cpus; i++)
		CPU_SET(o->worker_cpus[i], &it->cpus);
}

/* Shape the run once the units are known: task size, workers, slots. */
static unsigned plan(eachobs_iter *it, const eachobs_options *o,
		     const struct config *cfg)
{
	size_t workers;

	it->basesize = task_units(it, o, cfg->nthreads);
	it->buffersize = cfg->buffersize;
	plan_threads(it, o, cfg);
	if (it->executor == EACHOBS_SERIAL || it->nunits == 0) {
		it->nslots = cfg->consumer;
		return 0;
	}
	if (it->ordered) {
		/* Chunks larger than the window's share per worker would
		 * leave workers waiting for room instead of loading. */
		size_t share = cfg->buffersize / (2 * (size_t)cfg->nthreads);
		if (share < it->basesize)
			it->basesize = share ? share : 1;
	}
	workers = ceil_div(it->nunits, it->basesize);
	/* Autotuned, the share is taken per claim, of the workers loading
	 * then (ordered.c). */
	if (it->ordered && cfg->autotune && !o->basesize)
		it->basesize = SIZE_MAX;
	/* Batched, threads without a unit of their own help fill others'. */
	if (it->batchsize)
		workers = it->nunits > SIZE_MAX / it->cap ? SIZE_MAX
							  : it->nunits * it->cap;
	if (workers > cfg->nthreads)
		workers = cfg->nthreads;
	/* Ordered with hold = K, the consumer's K buffers are spares outside
	 * the window (hold.c). */
	it->nslots = cfg->buffersize + workers +
		     (eachobs__hold_spares(hold_swaps(it), o->hold) ? 0
								  : cfg->consumer);
	return (unsigned)workers;
}

/* Buffer i's data, and its entries at position j of the nmeta in
 * it->meta. */
static void set_buf(eachobs_iter *it, struct eachobs__buf *b, size_t i,
		    size_t j, size_t nmeta)
{
	size_t *idx = it->meta, *len = idx + nmeta * it->cap;
	int *status = (int *)(len + nmeta * it->cap);

	b->data = it->mem + i * it->buf_bytes;
	b->idx = idx + j * it->cap;
	b->len = len + j * it->cap;
	b->status = status + j * it->cap;
}

/* Unbatched, a slot's buffer keeps its one entry in the slot (slot.h). */
static void set_slot_buf(eachobs_iter *it, struct eachobs__slot *slot,
			 size_t i)
{
	struct eachobs__buf *b = &slot->b;

	b->data = it->mem + i * it->buf_bytes;
	b->idx = &slot->one.idx;
	b->len = &slot->one.len;
	b->status = &slot->one.status;
}

/* Every unit buffer there will ever be: one per slot, and the spares. */
static int alloc_slots(eachobs_iter *it, unsigned hold,
		       const eachobs_allocator *a)
{
	size_t nspares = eachobs__hold_spares(hold_swaps(it), hold);
	size_t nbufs = it->nslots + nspares;
	/* Entries outside the slots: every buffer's when batched, the
	 * spares' (at least one, for a non-empty block) when not. */
	bool inline_one = it->cap == 1;
	size_t nmeta = inline_one ? (nspares ? nspares : 1) : nbufs;
	int rc;

	it->slots = eachobs__alloc_aligned(it->nslots * sizeof(*it->slots));
	if (!it->slots)
		return eachobs__fail(-ENOMEM, "out of memory for %zu slots",
				     it->nslots);
	/* Before anything can fail: close wakes every slot's event. */
	memset(it->slots, 0, it->nslots * sizeof(*it->slots));
	it->meta = eachobs__alloc_aligned(nmeta * it->cap *
					  (2 * sizeof(size_t) + sizeof(int)));
	if (!it->meta)
		return eachobs__fail(-ENOMEM,
				     "out of memory for %zu buffers' indices "
				     "and lengths", nbufs);
	rc = eachobs__arena_create(&it->arena, a, nbufs * it->buf_bytes,
				   hold);
	if (rc == -ENOMEM)
		return eachobs__fail(rc,
				     "out of memory for %zu buffers of %zu bytes "
				     "(buffersize %zu + workers + hold)%s",
				     nbufs, it->buf_bytes, it->buffersize,
				     a ? ": the allocator returned NULL" : "");
	if (rc < 0)
		return eachobs__fail(rc, "allocator: its block is not aligned "
				     "to %d bytes", EACHOBS__CACHELINE);
	it->mem = it->arena->mem;
	for (size_t i = 0; i < it->nslots; i++) {
		if (inline_one)
			set_slot_buf(it, &it->slots[i], i);
		else
			set_buf(it, &it->slots[i].b, i, i, nmeta);
	}
	rc = eachobs__hold_init(&it->hold, hold, hold_swaps(it),
			       it->mode->give_back, it, it->arena);
	for (size_t i = 0; rc == 0 && i < nspares; i++)
		set_buf(it, &it->hold.spares[i], it->nslots + i,
			inline_one ? i : it->nslots + i, nmeta);
	return rc;
}

/* Close: `closing` for eachobs_cancelled and the start gate, the halt
 * word to 0 (every wait of every mode tests it), one wake. */
void eachobs__destroy(eachobs_iter *it)
{
	atomic_store(&it->closing, true);
	eachobs__loader_halt(&it->load, 0);
	it->mode->wake(it);
	eachobs__tuning_wake(it);
	eachobs__workers_wake_all(&it->workers);
	eachobs__workers_join(&it->workers);
	/* The next autotuned iterator on the pool starts from here. */
	if (it->tuning && it->workers.lender)
		eachobs__lender_learn(it->workers.lender,
				      eachobs__tuning_loaders(it));
	eachobs__workers_fini(&it->workers);
	eachobs__tuning_fini(it);
	it->mode->fini(it);
	eachobs__hold_fini(&it->hold);
	eachobs__yielded_fini(&it->done);
	eachobs__remap_fini(&it->remap);
	eachobs__free(it->meta);
	/* Tensors still alive keep the memory; their items come back to
	 * nobody. */
	eachobs__arena_close(it->arena);
	eachobs__arena_unref(it->arena);
	eachobs__free(it->slots);
	/* Last: workers take its lock on a failure until they are joined. */
	eachobs__loader_fini(&it->load);
	eachobs__free(it);
}

/* What each worker runs once through the start gate: its mode's loop. */
static void run_worker(void *arg, unsigned self)
{
	eachobs_iter *it = arg;

	it->mode->worker(it, self);
}

/* What the loaders need of the iterator, once its slots exist. */
static void plan_loader(eachobs_iter *it)
{
	struct eachobs__loader *ld = &it->load;

	ld->getobs = it->data.getobs;
	ld->ctx = it->data.ctx;
	ld->obs_size = it->data.obs_size;
	ld->layout = &it->layout;
	ld->sampler = &it->sampler;
	ld->remap = it->resumed ? &it->remap : NULL;
	ld->npos = it->npos;
	ld->cap = it->cap;
	ld->batched = it->batchsize > 0;
	ld->skip_errors = it->skip_errors;
	ld->lowest_first = it->ordered;
	ld->halt_from_failed = it->ordered;
	ld->slots = it->slots;
	ld->nslots = it->nslots;
	ld->closing = &it->closing;
	ld->on_fail = it->mode->fail;
	ld->owner = it;
}

/*
 * Autotune: the workers are a bound; those past the ones loading at
 * first get a thread when first needed (tuning.c). Past the usable CPUs
 * (less the consumer's under THREADED: it loads too when nothing is
 * ready) a getobs that computes gets more loaders only where they
 * clearly pay (tune.c).
 */
static int plan_tuning(eachobs_iter *it, const eachobs_options *o,
		       unsigned workers)
{
	unsigned cpus = eachobs__default_threads();
	unsigned start = o->autotune_start;

	if (it->executor == EACHOBS_THREADED && cpus > 1)
		cpus--;
	if (!start && o->pool)
		start = eachobs__lender_learned(o->pool);
	/* Under THREADED the consumer is the other loader. */
	if (!start)
		start = cpus;
	/* How far ahead: what the default buffersize gives that many
	 * loaders, within the buffersize in force. */
	struct eachobs__tune_depth dp = {
		.bound = it->buffersize,
		.per_loader = it->batchsize
				      ? EACHOBS_DEFAULT_BATCH_BUFFER_PER_THREAD
				      : EACHOBS_DEFAULT_BUFFER_PER_THREAD,
		.least = it->batchsize ? EACHOBS_DEFAULT_BATCH_BUFFER_MIN
				       : EACHOBS_DEFAULT_BUFFER_MIN,
	};
	if (eachobs__tuning_init(it, workers, start, cpus, &dp) < 0)
		return -ENOMEM;
	it->workers.nstart = eachobs__tuning_loaders(it);
	return 0;
}

static int start(eachobs_iter *it, const eachobs_options *o,
		 unsigned workers, bool autotune)
{
	int rc = alloc_slots(it, o->hold, o->allocator);

	plan_loader(it);

	/* Room for every run of yielded units there can be (resume.h). */
	if (rc == 0)
		rc = eachobs__yielded_init(&it->done,
					   it->nslots + workers + 2);
	if (rc == 0)
		rc = it->mode->init(it, workers);
	struct eachobs__job job = {
		.fn = run_worker,
		.arg = it,
		.closed = &it->closing,
		.stack_size = it->stack_size,
		.cpus = it->pin ? &it->cpus : NULL,
		.nice = it->worker_nice,
	};
	if (rc == 0)
		rc = eachobs__workers_init(&it->workers, workers, &job);
	if (rc == 0 && autotune && workers > 0)
		rc = plan_tuning(it, o, workers);
	if (rc == 0)
		rc = eachobs__workers_start(&it->workers);
	return rc;
}

/* A zeroed iterator that eachobs__destroy can destroy, or NULL with the
 * message set. */
static eachobs_iter *new_iterator(void)
{
	eachobs_iter *it = eachobs__alloc_aligned(sizeof(*it));

	if (!it) {
		eachobs__fail(-ENOMEM, "out of memory for the iterator (%zu "
			      "bytes)", sizeof(*it));
		return NULL;
	}
	memset(it, 0, sizeof(*it));
	eachobs__loader_setup(&it->load);
	/* Before any thread of it spins. */
	eachobs__spins_calibrate();
	return it;
}

int eachobs__parallel(eachobs_iter **itp, const eachobs_dataset *data,
		      const eachobs_options *o)
{
	struct config cfg;
	int rc = check_args(itp, data, o, &cfg);

	if (rc < 0)
		return rc;
	eachobs_iter *it = new_iterator();
	if (!it)
		return -ENOMEM;
	it->data = *data;
	it->executor = o->executor;
	it->ordered = o->ordered && o->executor != EACHOBS_SERIAL;
	it->mode = o->executor == EACHOBS_SERIAL ? &eachobs__serial_mode
		   : it->ordered		 ? &eachobs__ordered_mode
						 : &eachobs__unordered_mode;
	it->skip_errors = o->on_error == EACHOBS_ON_ERROR_SKIP;
	eachobs__workers_setup(&it->workers, o->pool);
	it->n = data->numobs(data->ctx);
	rc = eachobs__sampler_init(&it->sampler, it->n, o);
	if (rc == 0)
		rc = plan_units(it, o, &cfg);
	if (rc == 0)
		rc = start(it, o, plan(it, o, &cfg), cfg.autotune);
	if (rc < 0) {
		eachobs__destroy(it);
		return rc;
	}
	*itp = it;
	return 0;
}

/* A stream's own arguments, then the options (autotune does not apply:
 * nthreads threads load). */
static int check_stream(eachobs_iter **it, const eachobs_stream *s,
			eachobs_options *o, struct config *cfg)
{
	if (!it)
		return eachobs__fail(-EINVAL,
				     "eachobs_stream_parallel: it is NULL");
	*it = NULL;
	if (!s)
		return eachobs__fail(-EINVAL, "eachobs_stream_parallel: s is NULL");
	if (!s->open || !s->next || !s->close)
		return eachobs__fail(-EINVAL, "s->%s is NULL",
				     !s->open ? "open" : !s->next ? "next"
								  : "close");
	if (s->nshards == 0 || s->nshards > EACHOBS_STREAM_MAX_SHARDS)
		return eachobs__fail(-EINVAL,
				     "s->nshards %zu is not in 1 .. "
				     "EACHOBS_STREAM_MAX_SHARDS (%zu)",
				     s->nshards, EACHOBS_STREAM_MAX_SHARDS);
	/* The sampler's own check of shard_index (a stream has no
	 * indices: those options are ignored). */
	struct eachobs__sampler order;
	eachobs_options ranks = { .shard_index = o->shard_index,
				  .shard_count = o->shard_count };
	if (eachobs__sampler_init(&order, s->nshards, &ranks) < 0)
		return -EINVAL;
	if (o->shuffle_buffer > EACHOBS_MAX_SLOTS)
		return eachobs__fail(-EINVAL,
				     "shuffle_buffer %zu exceeds "
				     "EACHOBS_MAX_SLOTS (%u)",
				     o->shuffle_buffer, EACHOBS_MAX_SLOTS);
	o->autotune = false;
	int rc = check_options(o, s->obs_size, cfg);
	if (rc == 0 && !o->buffersize)
		cfg->buffersize += o->shuffle_buffer;
	return rc;
}

int eachobs__stream_parallel(eachobs_iter **itp, const eachobs_stream *s,
			     const eachobs_options *opts)
{
	eachobs_options o = *opts;
	struct config cfg;
	struct eachobs__stream_plan plan = { 0, 0 };
	int rc = check_stream(itp, s, &o, &cfg);

	if (rc < 0)
		return rc;
	eachobs_iter *it = new_iterator();
	if (!it)
		return -ENOMEM;
	it->data = (eachobs_dataset){ .ctx = s->ctx, .obs_size = s->obs_size };
	it->executor = o.executor;
	it->ordered = o.ordered || o.executor == EACHOBS_SERIAL;
	it->mode = &eachobs__stream_mode;
	it->skip_errors = o.on_error == EACHOBS_ON_ERROR_SKIP;
	eachobs__workers_setup(&it->workers, o.pool);
	rc = eachobs__stream_prepare(it, s, &o, it->ordered, cfg.nthreads,
				     cfg.buffersize, &plan);
	if (rc == 0 && !fits(&cfg, plan.nslots))
		rc = slots_fail(&cfg, &o, s->obs_size, plan.nslots);
	if (rc == 0) {
		plan_threads(it, &o, &cfg);
		it->nslots = plan.nslots;
		rc = start(it, &o, plan.workers, false);
	}
	if (rc < 0) {
		eachobs__destroy(it);
		return rc;
	}
	*itp = it;
	return 0;
}
