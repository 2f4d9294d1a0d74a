/*
 * Internal declarations shared by the library's source files.
 *
 * Map of the sources:
 *   event.c  sleeping and waking: an event count over a futex
 *   alloc.c  allocation and thread creation, with test-only fault injection
 *   arena.c  the memory items live in: the user's allocator, references
 *   cpus.c   what nthreads = 0 means: the CPUs this process may use
 *   deque.c  unordered work sharing: per-worker ranges, stealing
 *   lender.c an eachobs_pool's persistent threads, lent to run opaque
 *            work (lender.h); it knows nothing of iterators
 *   workers.c an iterator's worker threads: created or lent, the start gate
 *   handoff.c unordered hand-off: items through two ck_rings, credits
 *   serial.c the SERIAL mode: the consumer loads each unit itself
 *   unordered.c the unordered mode: deques, load, hand-off
 *   window.c ordered hand-off: a reorder window of turns
 *   ordered.c the ordered mode: window, load
 *   sampler.c which dataset index each position visits (shuffle, shards)
 *   resume.c  checkpoint and resume: yielded units as spans, the record
 *   load.c   running getobs: one observation, or a batch several threads fill
 *   hold.c   what the consumer holds, and eachobs_release
 *   start.c  starting and stopping: validation, defaults, plan, allocation
 *   iter.c   the consumer: next, batches, release, checkpoint, interrupt
 *   error.c  eachobs_strerror, eachobs_last_error and the messages
 *   abi.c    what keeps programs built against other 0.x headers working:
 *            options and stats passed with their size, the 0.1 entry
 *            points, the version
 */
#ifndef EACHOBS_INTERNAL_H
#define EACHOBS_INTERNAL_H

#include "base.h"
#include "deque.h"
#include "arena.h"
#include "eachobs.h"
#include "error.h"
#include "handoff.h"
#include "hold.h"
#include "lender.h"
#include "resume.h"
#include "sampler.h"
#include "slot.h"
#include "window.h"
#include "workers.h"

#include <ck_ring.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- abi.c: the structs that grow ----------------------------------- */

/*
 * The sizes of eachobs_options and eachobs_stats in 0.1.0, whose
 * eachobs_parallel and eachobs_get_stats took no size: the end of the last
 * 0.1 field, rounded up to the struct's alignment as the compiler pads it.
 * The alignment stays 0.1's as long as no appended field needs more than
 * the 0.1 members did; test/test_abi.c checks both sizes against a copy of
 * the 0.1 layouts.
 */
#define EACHOBS__ROUND_UP(x, a) (((x) + (a) - 1) / (a) * (a))
#define EACHOBS__OPTIONS_SIZE_0_1                                            \
	EACHOBS__ROUND_UP(offsetof(eachobs_options, shard_count) +           \
				  sizeof(unsigned),                          \
			  _Alignof(eachobs_options))
#define EACHOBS__STATS_SIZE_0_1                                              \
	EACHOBS__ROUND_UP(offsetof(eachobs_stats, nworkers) +                \
				  sizeof(unsigned),                          \
			  _Alignof(eachobs_stats))

/* ---- cpus.c: the default number of threads ---------------------------- */

/* The CPUs the calling thread may run on (its affinity), at most a cgroup
 * v2 quota's worth; 1 .. EACHOBS_MAX_THREADS. Reads them at every call. */
unsigned eachobs__default_threads(void);
/* A cgroup v2 cpu.max file's text, "QUOTA PERIOD" or "max PERIOD": the
 * quota in whole CPUs, ceil(QUOTA / PERIOD), or 0 for none (and for text
 * it cannot read). */
unsigned eachobs__cpu_max_parse(const char *text);
/* The cgroup v2 path ("0::PATH") in /proc/self/cgroup's text, copied into
 * path; -ENOENT when there is none, it does not fit, or it lies outside
 * the process's cgroup namespace. */
int eachobs__cgroup2_path(const char *text, char *path, size_t size);

/* ---- unordered.c: the unordered mode's loaders ------------------------ */

/* A getobs under EACHOBS__CHEAP_NS is cheap: loaders then move up to
 * EACHOBS__RUN_MAX observations at a time (see unordered.c). */
enum { EACHOBS__RUN_MAX = 16, EACHOBS__CHEAP_NS = 2000 };


/* ---- ordered.c: the ordered mode's loaders and consumer --------------- */

struct eachobs__ordered {
	size_t chunk;     /* units a worker claims at once */
	unsigned waits;   /* consumer only: waits without helping */
	size_t max_waiting; /* consumer only: most units loaded ahead */
	bool owes;        /* consumer only: a batch it opened may have entries
			   * left to claim (ordered.c, help) */
};

/* ---- load.c: the failure record ------------------------------------- */

/*
 * The lowest failed position under on_error = STOP, for a consumer whose
 * failed unit will never complete (its other entries are not loaded once
 * the failure is known). Written under lock; `set` is stored with release
 * after the fields, so a reader that sees it (acquire) may read them under
 * the lock.
 */
struct eachobs__failrec {
	pthread_mutex_t lock;
	_Atomic bool set;
	size_t pos;
	size_t idx;
	int code;
};

/* ---- the iterator --------------------------------------------------- */

struct eachobs_iter {
	/* Fixed at start. */
	eachobs_dataset data;
	size_t n;          /* numobs() */
	struct eachobs__sampler sampler;
	size_t npos;       /* positions iterated (after shards, drop_last) */
	/* Resumed (eachobs_options.resume): nunits counts the units left,
	 * which `remap` maps to the original units (resume.c). */
	bool resumed;
	struct eachobs__remap remap;
	struct eachobs__ckpt_key key;  /* what a checkpoint must match */
	size_t nunits;     /* what is handed over: observations, or batches */
	size_t batchsize;  /* 0: unbatched */
	size_t cap;        /* observations per unit: batchsize, or 1 */
	eachobs_executor executor;
	bool ordered;
	const struct eachobs__mode *mode;
	bool skip_errors;  /* on_error = SKIP */
	size_t basesize;   /* units per task (unordered) */
	size_t buffersize; /* units */
	size_t nslots;     /* see plan() */
	size_t buf_bytes;  /* data bytes of one unit, rounded up to 64 */
	size_t stack_size; /* of each worker */
	bool pin;          /* workers run only on `cpus` */
	cpu_set_t cpus;
	int worker_nice;
	struct eachobs__slot *slots;
	struct eachobs__arena *arena; /* every item buffer */
	unsigned char *mem;           /* arena->mem */
	void *meta;        /* every buffer's idx, len and status arrays */

	/* Shared by every thread. */
	_Atomic bool closing EACHOBS__ALIGNED; /* no getobs may start */
	_Atomic bool stop;   /* unordered: a getobs failed, load no more */
	/* The lowest unit no getobs may start for (load.c, halted):
	 * SIZE_MAX, lowered by a failure and to 0 by close. */
	_Atomic size_t load_limit EACHOBS__ALIGNED;
	/* eachobs_interrupt calls so far; the consumer answers each change
	 * with one -EINTR (interrupts_seen is its own copy). */
	_Atomic uint32_t interrupts;
	/* Batched: units opened whose entries are not all claimed yet, so
	 * that a thread looking for one to help with need not scan every
	 * slot when there is none. */
	_Atomic size_t open_units EACHOBS__ALIGNED;
	struct eachobs__workers workers;
	struct eachobs__deques deques; /* unordered */
	struct eachobs__handoff handoff; /* unordered, with workers */
	/* &handoff when the consumer may take from it first (iter.c), else
	 * NULL. */
	struct eachobs__handoff *ready;
	struct eachobs__window window; /* ordered */
	struct eachobs__ordered order;
	struct eachobs__failrec fail;

	/* The consumer's own. */
	struct eachobs__hold hold EACHOBS__ALIGNED;
	size_t yielded;    /* units taken (ordered: the next one to take) */
	uint64_t help_ns;  /* THREADED: what the consumer's last help took per
			    * observation (0: not measured yet) */
	uint32_t interrupts_seen;
	/* A unit taken but not yielded because an interrupt came first: the
	 * next call yields it. */
	struct eachobs__slot *stash;
	/* SERIAL, batched: the unit being filled, between calls that an
	 * interrupt ended. */
	struct eachobs__slot *serial_open;
	int err;           /* sticky: the error returned from now on */
	size_t err_idx;
	size_t nfailures;  /* skipped (on_error = SKIP) */
	struct eachobs__stats cstats; /* the consumer's own */
	size_t nyielded;   /* observations yielded */
	struct eachobs__yielded done;  /* units yielded, for checkpoints */
	size_t nbatches;   /* batches yielded */
	eachobs_failure failures[EACHOBS_FAILURES_KEPT];
};

static inline bool eachobs__closing(const eachobs_iter *it)
{
	return atomic_load_explicit(&it->closing, memory_order_acquire);
}

/* Whether an eachobs_interrupt is waiting for the consumer's answer. */
static inline bool eachobs__interrupted(const eachobs_iter *it)
{
	return atomic_load_explicit(&it->interrupts, memory_order_relaxed) !=
	       it->interrupts_seen;
}

/* Whether the failure record is filled (the consumer may read it). */
static inline bool eachobs__failed(const eachobs_iter *it)
{
	return atomic_load_explicit(&it->fail.set, memory_order_acquire);
}

/* Lower load_limit to u (never raise it). */
static inline void eachobs__lower_load_limit(eachobs_iter *it, size_t u)
{
	eachobs__atomic_lower(&it->load_limit, u, memory_order_relaxed);
}

/* start.c: stop the workers and free everything (eachobs_close, a failed
 * start). */
void eachobs__destroy(eachobs_iter *it);

/* The original unit that unit u stands for: itself, unless resumed. */
static inline size_t eachobs__unit_origin(const eachobs_iter *it, size_t u)
{
	return it->resumed ? eachobs__remap_unit(&it->remap, u) : u;
}

/* The dataset index at a position of the iteration order. */
static inline size_t eachobs__index_at(const eachobs_iter *it, size_t pos)
{
	return eachobs__sampler_index(&it->sampler, pos);
}

/* load.c */
/* Observations in unit u (the last batch may be short). */
size_t eachobs__unit_count(const eachobs_iter *it, size_t u);
/* Load unit u into slot, which the caller owns; other threads may help
 * with a batch. True when the caller completed the unit and must hand it
 * on; false when a helper will (or close began). */
bool eachobs__fill(eachobs_iter *it, struct eachobs__slot *slot, size_t u);
/* Unbatched, untimed: load unit u into slot. A run of them is timed once
 * (two clock reads cost 50 ns here, more than a cheap getobs) and added to
 * this thread's stats with eachobs__account(t0, t1, count). */
void eachobs__fill_one(eachobs_iter *it, struct eachobs__slot *slot, size_t u);
void eachobs__account(uint64_t t0, uint64_t t1, size_t loaded);
/* Batched: load unclaimed entries of an open batch whose unit is below
 * bound, scanning the slots from hint. 0 when there was none; 1 after
 * loading, with *done the slot when that completed its unit (the caller
 * hands it on), else NULL. */
int eachobs__help(eachobs_iter *it, unsigned hint, size_t bound,
		  struct eachobs__slot **done);
/* Batched, getobs slow: make slot (owned by the caller) open for unit u
 * and leave its entries to eachobs__help, the caller's included. */
void eachobs__open(eachobs_iter *it, struct eachobs__slot *slot, size_t u);
/* SERIAL, batched: load the next claimable entries of slot's open unit;
 * true when that completed the unit. */
bool eachobs__fill_step(eachobs_iter *it, struct eachobs__slot *slot);
/* Whether getobs measured cheap on this thread for it (see load.c): runs
 * then, and no help before opening a unit. */
bool eachobs__getobs_cheap(const eachobs_iter *it);

/* start.c and iter.c: eachobs_parallel_sized and eachobs_get_stats_sized
 * (abi.c) with the options and stats of this library's own size; o is
 * never NULL. */
int eachobs__parallel(eachobs_iter **itp, const eachobs_dataset *data,
		      const eachobs_options *o);
void eachobs__get_stats(const eachobs_iter *it, eachobs_stats *st);

/* What a consumer's take returns, beside 1 (a unit), 0 (the end) and
 * -EINTR (an interrupt): a failure whose unit will not arrive; the code is
 * in the failure record. */
enum { EACHOBS__TAKE_FAILED = 3 };

/* The consumer answers a pending interrupt: true (once per change of the
 * count) when there was one. */
static inline bool eachobs__take_interrupt(eachobs_iter *it)
{
	uint32_t n = atomic_load_explicit(&it->interrupts, memory_order_relaxed);

	if (n == it->interrupts_seen)
		return false;
	it->interrupts_seen = n;
	return true;
}

/*
 * What an executor and an ordering make of loading and handing over,
 * chosen once at start (start.c): SERIAL, the consumer loading each unit
 * itself (serial.c); unordered, deques and the hand-off (unordered.c);
 * ordered, the reorder window (ordered.c).
 */
struct eachobs__mode {
	/* A worker's loop until no work is left or close began (SERIAL:
	 * NULL, it has no workers). */
	void (*worker)(eachobs_iter *it, unsigned self);
	/* Consumer: the next unit, 1 with *out; 0 at the end; -EINTR for an
	 * interrupt; EACHOBS__TAKE_FAILED for a failure whose unit will not
	 * arrive. */
	int (*take)(eachobs_iter *it, struct eachobs__slot **out);
	/* Consumer: a slot it let go of goes back to the loaders (it: the
	 * iterator; the shape of hold.h's give-back). */
	void (*give_back)(void *it, struct eachobs__slot *slot);
	/* Any loader: a getobs failed under STOP at unit u (the failure
	 * record is written): stop loading what that makes moot, and wake a
	 * consumer that may wait for what will not come. */
	void (*fail)(eachobs_iter *it, size_t u);
	/* Any thread, also a signal handler: wake the consumer to look at an
	 * interrupt. */
	void (*wake_consumer)(eachobs_iter *it);
	/* The most units that waited for the consumer at once (stats). */
	size_t (*max_waiting)(const eachobs_iter *it);
};

extern const struct eachobs__mode eachobs__serial_mode;
extern const struct eachobs__mode eachobs__unordered_mode;
extern const struct eachobs__mode eachobs__ordered_mode;

#endif /* EACHOBS_INTERNAL_H */
