/*
 * Autotune on an iterator: what the controller (tune.c) is told and what
 * it moves. Loaders call eachobs__turn between units: it parks the ones
 * not among those loading, and the one that finds a decision due gathers
 * the figures (every thread's stats, the loaders' CPU clocks), asks the
 * controller, starts the threads it wants (workers.c) and gives the mode
 * the depth it wants.
 */
#define _GNU_SOURCE
#include "internal.h"
#include "tune.h"

#include <errno.h>
#include <string.h>
#include <time.h>

/* A worker's CPU clock before it ran a first turn. */
#define NO_CLOCK INT64_MIN

struct eachobs__tuning {
	struct eachobs__tune tune;
	unsigned n;                /* workers */
	size_t least, depth;       /* the depth's floor, and the mode's now */
	_Atomic int64_t *clock;    /* per worker: its CPU clock id */
	/* The decider's own: per worker, its CPU time last read, and their
	 * sum (only what was seen to grow, so a thread that ended does not
	 * make it fall). */
	uint64_t *cpu_seen;
	uint64_t cpu_total;
};

/* The loaders' CPU time so far: each worker's clock, read from here. */
static uint64_t loaders_cpu(struct eachobs__tuning *tn)
{
	for (unsigned j = 0; j < tn->n; j++) {
		int64_t id = atomic_load_explicit(&tn->clock[j],
						  memory_order_acquire);
		struct timespec ts;
		if (id == NO_CLOCK ||
		    clock_gettime((clockid_t)id, &ts) != 0)
			continue;
		uint64_t ns = (uint64_t)ts.tv_sec * 1000000000u +
			      (uint64_t)ts.tv_nsec;
		if (ns > tn->cpu_seen[j]) {
			tn->cpu_total += ns - tn->cpu_seen[j];
			tn->cpu_seen[j] = ns;
		}
	}
	return tn->cpu_total;
}

static void sample(eachobs_iter *it, uint64_t now,
		   struct eachobs__tune_sample *s)
{
	struct eachobs__worker_totals w;

	eachobs__workers_totals(&it->workers, &w);
	*s = (struct eachobs__tune_sample){
		.now_ns = now,
		.worker_loaded = w.loaded,
		.getobs_ns = w.getobs_ns,
		.room_ns = w.room_ns,
		.loaded = w.loaded + eachobs__stat_read(&it->cstats.loaded),
	};
	s->waited_ns = eachobs__idle_until(&it->cstats, now);
	s->starved_ns = s->waited_ns +
			eachobs__stat_read(&it->cstats.getobs_ns);
	if (it->tuning)
		s->cpu_ns = loaders_cpu(it->tuning);
}

/* The mode's depth follows the controller's (only the decider calls it,
 * and tuning_init before any worker runs). */
static void apply_depth(eachobs_iter *it)
{
	struct eachobs__tuning *tn = it->tuning;
	size_t d = eachobs__tune_depth(&tn->tune);

	if (d == tn->depth || !it->mode->set_depth)
		return;
	tn->depth = d;
	it->mode->set_depth(it, d, tn->least);
}

int eachobs__tuning_init(eachobs_iter *it, unsigned workers, unsigned start,
			 unsigned cpus, const struct eachobs__tune_depth *dp)
{
	struct eachobs__tuning *tn = eachobs__alloc_aligned(sizeof(*tn));
	struct eachobs__tune_sample first;

	if (!tn)
		return eachobs__fail(-ENOMEM, "out of memory for autotune");
	memset(tn, 0, sizeof(*tn));
	it->tuning = tn;
	tn->n = workers;
	tn->clock = eachobs__calloc(workers, sizeof(*tn->clock));
	tn->cpu_seen = eachobs__calloc(workers, sizeof(*tn->cpu_seen));
	if (!tn->clock || !tn->cpu_seen)
		return eachobs__fail(-ENOMEM, "out of memory for autotune's "
				     "record of %u workers", workers);
	for (unsigned j = 0; j < workers; j++)
		atomic_init(&tn->clock[j], NO_CLOCK);
	sample(it, eachobs__now_ns(), &first);
	eachobs__tune_init(&tn->tune, workers, cpus, start, &first, dp);
	tn->least = dp->least < dp->bound ? dp->least : dp->bound;
	/* Always once before the workers run, whatever the depth: the
	 * mode learns the least depth here (set_depth's contract). */
	tn->depth = 0;
	apply_depth(it);
	return 0;
}

void eachobs__tuning_fini(eachobs_iter *it)
{
	struct eachobs__tuning *tn = it->tuning;

	if (!tn)
		return;
	eachobs__free(tn->clock);
	eachobs__free(tn->cpu_seen);
	eachobs__free(tn);
	it->tuning = NULL;
}

/* The ticket's holder: decide, start what threads that takes. */
static void decide(eachobs_iter *it, uint64_t now)
{
	struct eachobs__tune *t = &it->tuning->tune;
	struct eachobs__tune_sample s;
	unsigned want, have;

	sample(it, now, &s);
	want = eachobs__tune_decide(t, &s);
	have = want > eachobs__tune_active(t)
		       ? eachobs__workers_grow(&it->workers, want)
		       : want;
	apply_depth(it);
	eachobs__tune_commit(t, have < want ? have : want);
}

static bool halted(const void *arg)
{
	return eachobs__halted_at(arg, 0);
}

void eachobs__tuning_tick(eachobs_iter *it)
{
	struct eachobs__tuning *tn = it->tuning;

	uint64_t now = eachobs__now_ns();

	if (eachobs__tune_due(&tn->tune, now))
		decide(it, now);
}

bool eachobs__tuning_turn(eachobs_iter *it, unsigned self)
{
	struct eachobs__tuning *tn = it->tuning;

	if (atomic_load_explicit(&tn->clock[self], memory_order_relaxed) ==
	    NO_CLOCK) {
		clockid_t id;
		if (pthread_getcpuclockid(pthread_self(), &id) == 0)
			atomic_store_explicit(&tn->clock[self], (int64_t)id,
					      memory_order_release);
	}
	eachobs__tuning_tick(it);
	return eachobs__tune_park(&tn->tune, self, halted, it);
}

void eachobs__tuning_finish(eachobs_iter *it)
{
	if (it->tuning)
		eachobs__tune_finish(&it->tuning->tune);
}

void eachobs__tuning_wake(eachobs_iter *it)
{
	if (it->tuning)
		eachobs__tune_wake(&it->tuning->tune);
}

unsigned eachobs__tuning_loaders(const eachobs_iter *it)
{
	return it->tuning ? eachobs__tune_active(&it->tuning->tune)
			  : it->workers.nthreads;
}

void eachobs__tuning_stats(const eachobs_iter *it, eachobs_stats *st)
{
	const struct eachobs__tune *t;

	st->nloading = st->max_loading = st->nworkers;
	st->buffer_depth = st->buffersize = it->buffersize;
	if (!it->tuning)
		return;
	t = &it->tuning->tune;
	if (it->mode->set_depth)
		st->buffer_depth = eachobs__tune_depth(t);
	st->nloading = eachobs__tune_active(t);
	st->max_loading = atomic_load_explicit(&t->most, memory_order_relaxed);
	st->tune_reason = atomic_load_explicit(&t->reason,
					       memory_order_relaxed);
	if (st->nloading > st->nworkers)
		st->nloading = st->nworkers;
	if (st->max_loading > st->nworkers)
		st->max_loading = st->nworkers;
}

const char *eachobs_tune_reason_string(unsigned reason)
{
	switch (reason) {
	case EACHOBS_TUNE_OFF:
		return "not autotuned";
	case EACHOBS_TUNE_STARTING:
		return "measuring: no decision yet";
	case EACHOBS_TUNE_CONSUMER_BOUND:
		return "the consumer does not wait: the fewest threads that "
		       "keep it fed";
	case EACHOBS_TUNE_CPU_BOUND:
		return "getobs computes: no more threads than pay on these "
		       "CPUs";
	case EACHOBS_TUNE_GROWING:
		return "getobs waits and more threads keep paying: adding";
	case EACHOBS_TUNE_PLATEAU:
		return "getobs waits, and more threads stopped raising "
		       "throughput";
	case EACHOBS_TUNE_AT_BOUND:
		return "the consumer waits with nthreads loading: a larger "
		       "nthreads may help, unless getobs computes";
	case EACHOBS_TUNE_MEMORY_BOUND:
		return "the consumer waits while loaders wait for room in the "
		       "whole buffer: a larger buffersize may help";
	default:
		return "unknown autotune reason";
	}
}
