/*
 * Internal declarations shared by the library's source files.
 *
 * The iterator and its modes; each mechanism's struct and functions are
 * declared in the header named after it. docs/design.md ("Layers") is the
 * map of the sources: which file holds what, and who may use whom.
 */
#ifndef EACHOBS_INTERNAL_H
#define EACHOBS_INTERNAL_H

#include "base.h"
#include "cpus.h"
#include "arena.h"
#include "eachobs.h"
#include "error.h"
#include "hold.h"
#include "layout.h"
#include "lender.h"
#include "load.h"
#include "resume.h"
#include "sampler.h"
#include "slot.h"
#include "workers.h"

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
	size_t basesize;   /* units per claim: a task (unordered), a chunk
			    * (ordered) */
	size_t buffersize; /* units */
	size_t nslots;     /* see plan() */
	size_t buf_bytes;  /* data bytes of one unit, rounded up to 64 */
	struct eachobs__layout layout; /* its fields' arrays */
	size_t stack_size; /* of each worker */
	bool pin;          /* workers run only on `cpus` */
	cpu_set_t cpus;
	int worker_nice;
	struct eachobs__slot *slots;
	struct eachobs__arena *arena; /* every item buffer */
	unsigned char *mem;           /* arena->mem */
	void *meta;        /* idx, len and status arrays of the buffers whose
			    * entries are not in a slot (slot.h) */

	/* The mode's own state: its file's struct, made by mode->init and
	 * freed by mode->fini; no other file sees inside it. */
	void *ms;
	/* Autotune (tuning.c), or NULL: which workers load. */
	struct eachobs__tuning *tuning;

	/* Shared by every thread. */
	_Atomic bool closing EACHOBS__ALIGNED; /* no getobs may start */
	/* eachobs_interrupt calls so far; the consumer answers each change
	 * with one -EINTR (interrupts_seen is its own copy). */
	_Atomic uint32_t interrupts;
	/* Running getobs: its limit, the one halt word of every mode (no
	 * getobs starts at or above it: lowered to the failed unit by a
	 * failure under STOP, to 0 by close), and its failure record. */
	struct eachobs__loader load;
	struct eachobs__workers workers;

	/* The consumer's own. */
	struct eachobs__hold hold EACHOBS__ALIGNED;
	size_t yielded;    /* units taken (ordered: the next one to take) */
	uint32_t interrupts_seen;
	/* A unit taken but not yielded because an interrupt came first: the
	 * next call yields it. */
	struct eachobs__slot *stash;
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
	return eachobs__loader_failed(&it->load);
}

/* ---- tuning.c: autotune on an iterator ------------------------------ */

struct eachobs__tune_depth; /* tune.h */

/* Before the workers start: autotune for `workers` of them, `start`
 * loading at first, `cpus` the most for a getobs that computes; 0 or
 * -ENOMEM (fini runs all the same). */
int eachobs__tuning_init(eachobs_iter *it, unsigned workers, unsigned start,
			 unsigned cpus, const struct eachobs__tune_depth *dp);
void eachobs__tuning_fini(eachobs_iter *it);
bool eachobs__tuning_turn(eachobs_iter *it, unsigned self);
/* Worker self, holding nothing, between units: false when it should stop
 * (the loading halted while it was parked). Decides when a decision is
 * due; parks while self is not among the loaders. */
static inline bool eachobs__turn(eachobs_iter *it, unsigned self)
{
	return !it->tuning || eachobs__tuning_turn(it, self);
}
void eachobs__tuning_tick(eachobs_iter *it);
/* Any worker, inside a long run of loads (the entries of open batches):
 * decide when a decision is due, without parking. */
static inline void eachobs__tick(eachobs_iter *it)
{
	if (it->tuning)
		eachobs__tuning_tick(it);
}
/* A worker found no work left: parked workers may leave too. */
void eachobs__tuning_finish(eachobs_iter *it);
/* Any thread, also a signal handler: parked workers test again. */
void eachobs__tuning_wake(eachobs_iter *it);
/* The workers loading now: all of them without autotune. */
unsigned eachobs__tuning_loaders(const eachobs_iter *it);
/* Its fields of eachobs_stats (after nworkers is set). */
void eachobs__tuning_stats(const eachobs_iter *it, eachobs_stats *st);

/* start.c: stop the workers and free everything (eachobs_close, a failed
 * start). */
void eachobs__destroy(eachobs_iter *it);

/* start.c and iter.c: eachobs_parallel_sized and eachobs_get_stats_sized
 * (abi.c) with the options and stats of this library's own size; o is
 * never NULL. */
int eachobs__parallel(eachobs_iter **itp, const eachobs_dataset *data,
		      const eachobs_options *o);
int eachobs__stream_parallel(eachobs_iter **itp, const eachobs_stream *s,
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
 * ordered, the reorder window (ordered.c). Each mode keeps its state in
 * a struct of its own file (it->ms), which no other file sees into, and
 * every function takes the iterator.
 */
struct eachobs__mode {
	/* Make it->ms for `workers` loader threads, once the slots exist;
	 * 0 or a negative errno with the message set (fini runs all the
	 * same, also when init was never called: it->ms is NULL). */
	int (*init)(eachobs_iter *it, unsigned workers);
	/* Free it->ms, once no thread runs the mode any more. */
	void (*fini)(eachobs_iter *it);
	/* A worker's loop until no work is left or the loading halted
	 * (SERIAL: NULL, it has no workers). */
	void (*worker)(eachobs_iter *it, unsigned self);
	/* Consumer: the next unit, 1 with *out; 0 at the end; -EINTR for an
	 * interrupt; EACHOBS__TAKE_FAILED for a failure whose unit will not
	 * arrive. */
	int (*take)(eachobs_iter *it, struct eachobs__slot **out);
	/* Consumer: a slot it let go of goes back to the loaders. */
	void (*give_back)(eachobs_iter *it, struct eachobs__slot *slot);
	/* Any loader: a getobs failed under STOP at unit u (the failure
	 * record is written and the halt word lowered): wake whoever may
	 * wait for what will not come. */
	void (*fail)(eachobs_iter *it, size_t u);
	/* Any thread, also a signal handler: wake every sleeper of the mode
	 * to test its conditions again (an interrupt; close, after the halt
	 * word went to 0). */
	void (*wake)(eachobs_iter *it);
	/* The most units that waited for the consumer at once (stats). */
	size_t (*max_waiting)(const eachobs_iter *it);
	/* Optional (autotune; NULL: the depth stays buffersize). Any
	 * thread: from now on at most `units` loaded units may wait for the
	 * consumer (at most buffersize); `least` is the same on every call
	 * and units never below it; the first call comes before any worker
	 * runs. */
	void (*set_depth)(eachobs_iter *it, size_t units, size_t least);
	/* Optional, for a mode with a record of its own (streams); NULL:
	 * the iterator's units, positions and getobs. Consumer: the unit
	 * in slot is yielded (or skipped), read before its slot may go
	 * back; eachobs_checkpoint's record; eachobs_length; the message of
	 * a failure at idx that fn reports (returns code). */
	void (*yielded)(eachobs_iter *it, const struct eachobs__slot *slot);
	int (*checkpoint)(eachobs_iter *it, void *buf, size_t *len);
	size_t (*length)(const eachobs_iter *it);
	int (*fail_message)(const eachobs_iter *it, int code, const char *fn,
			    size_t idx);
};

/* The halt word: no getobs starts for unit u when this is true. */
static inline bool eachobs__halted_at(const eachobs_iter *it, size_t u)
{
	return u >= atomic_load_explicit(&it->load.limit, memory_order_relaxed);
}

extern const struct eachobs__mode eachobs__serial_mode;
extern const struct eachobs__mode eachobs__unordered_mode;
extern const struct eachobs__mode eachobs__ordered_mode;
extern const struct eachobs__mode eachobs__stream_mode;

#endif /* EACHOBS_INTERNAL_H */
