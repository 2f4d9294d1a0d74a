/*
 * Internal declarations shared by the library's source files.
 *
 * Map of the sources:
 *   event.c  sleeping and waking: an event count over a futex
 *   alloc.c  allocation and thread creation, with test-only fault injection
 *   arena.c  the memory items live in: the user's allocator, references
 *   cpus.c   what nthreads = 0 means: the CPUs this process may use
 *   pool.c   worker threads, per-worker deques of index ranges, stealing
 *   ring.c   unordered hand-off: slots through two ck_rings, with credits
 *   order.c  ordered hand-off: the slots as a reorder window
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

#include "eachobs.h"
#include "error.h"
#include "resume.h"
#include "sampler.h"

#include <ck_ring.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EACHOBS__CACHELINE 64
#define EACHOBS__ALIGNED __attribute__((aligned(EACHOBS__CACHELINE)))
/* The library's thread-locals are few and small: initial-exec spares the
 * __tls_get_addr call a shared library pays otherwise (on every getobs).
 * The cost: a dlopen()ed libeachobs needs the few bytes of static TLS
 * surplus glibc keeps for that. */
#define EACHOBS__TLS _Thread_local __attribute__((tls_model("initial-exec")))

/* ---- error.c (also error.h) ------------------------------------------ */

/* Thread j (0-based) of n could not be created: pthread_create's err
 * (positive), the stack size and the affinity it was given (or NULL);
 * who names the thread ("worker", "eachobs_pool_create:"). */
int eachobs__fail_thread(int code, int err, const char *who, unsigned j,
			 unsigned n, size_t stack_size, const cpu_set_t *cpus)
	__attribute__((cold));

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

/* ---- event.c -------------------------------------------------------- */

/*
 * An event count: threads sleep on it until a condition they test becomes
 * true. The notifier changes the condition first, then calls notify, which
 * issues a full fence before it looks for sleepers; a waiter registers
 * itself before testing the condition. Either the notifier sees the waiter or
 * the waiter sees the new condition, so no wake-up is lost.
 */
struct eachobs__event {
	_Atomic uint32_t epoch;   /* the futex word; bumped by every wake */
	_Atomic uint32_t waiters; /* threads between registering and leaving */
};

typedef bool (*eachobs__cond_fn)(const void *arg);

/* The same pair for an event that at most one thread waits on at a time;
 * cheaper when notifications come faster than the sleeper wakes. A NULL
 * cond means "always". */
void eachobs__event_wait_single(struct eachobs__event *ev,
				eachobs__cond_fn cond, const void *arg,
				unsigned spins);
void eachobs__event_notify_single(struct eachobs__event *ev,
				  eachobs__cond_fn cond, const void *arg);

/* Spins before sleeping (a pause is ~25 ns here): a few microseconds for
 * the consumer, which is on the critical path, less for loaders, which are
 * many and share the cores with the consumer. Longer spins measured no
 * better on 2 cores (TimeDataset, P = 16, 10 us and 100 us). */
enum { EACHOBS__CONSUMER_SPINS = 128, EACHOBS__LOADER_SPINS = 32 };

void eachobs__event_init(struct eachobs__event *ev);
/* Return once cond(arg) is true: spin about `spins` times, then sleep. */
void eachobs__event_wait(struct eachobs__event *ev, eachobs__cond_fn cond,
			 const void *arg, unsigned spins);
/* Wake up to nwake sleepers if there are any (call after changing the
 * condition). Cheap when nobody waits: a fence and a load. */
void eachobs__event_notify(struct eachobs__event *ev, int nwake);
static inline void eachobs__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* ---- stats ---------------------------------------------------------- */

/*
 * What one thread did, for eachobs_get_stats. Each is written only by the
 * thread it describes (a worker, or the consumer) and read by the consumer,
 * so updates are plain load-then-store on relaxed atomics, no RMW.
 */
struct eachobs__stats {
	_Atomic uint64_t loaded;    /* getobs calls that returned */
	_Atomic uint64_t getobs_ns; /* time inside getobs */
	_Atomic uint64_t idle_ns;   /* time waiting (see eachobs_stats) */
	_Atomic uint64_t steals;
} EACHOBS__ALIGNED;

/* The stats of the thread running now: its worker's, or inside
 * eachobs_next its iterator's consumer stats; NULL elsewhere. */
extern EACHOBS__TLS struct eachobs__stats *eachobs__tls_stats;

uint64_t eachobs__now_ns(void);
static inline void eachobs__stat_add(_Atomic uint64_t *c, uint64_t v)
{
	atomic_store_explicit(
		c, atomic_load_explicit(c, memory_order_relaxed) + v,
		memory_order_relaxed);
}
/* eachobs__event_wait, adding the time to this thread's idle_ns when the
 * condition did not hold at once (so the fast path reads no clock). */
void eachobs__event_wait_timed(struct eachobs__event *ev, eachobs__cond_fn cond,
			       const void *arg, unsigned spins);

/* ---- alloc.c -------------------------------------------------------- */

void *eachobs__calloc(size_t nmemb, size_t size);
/* size bytes aligned to a cache line; NULL on failure. */
void *eachobs__alloc_aligned(size_t size);
void eachobs__free(void *p);
/* pthread_create with that stack size and, unless cpus is NULL, that CPU
 * affinity; returns 0 or a positive errno like pthread_create. */
int eachobs__thread_create(pthread_t *t, size_t stack_size,
			   const cpu_set_t *cpus, void *(*fn)(void *),
			   void *arg);

/* ---- arena.c: the memory items live in --------------------------------- */

struct eachobs__arena {
	_Atomic unsigned refs;     /* the iterator, and each live tensor */
	bool user;                 /* from the user's allocator `a` */
	eachobs_allocator a;
	unsigned char *mem;        /* 64-byte aligned */
	size_t size;
	/* Items given back by tensor deleters, on any thread, for the
	 * consumer to take in (eachobs__arena_drain): under lock; `pending`
	 * lets the consumer skip the lock when there is nothing. `open` is
	 * false once the iterator closed: nobody takes them in any more. */
	pthread_mutex_t lock;
	bool open;
	const void **returned;     /* room for every item the consumer holds */
	unsigned nreturned;
	_Atomic bool pending;
};

/* One block of size bytes, from a (NULL: ours), with one reference and
 * room for nhold items given back: 0, -ENOMEM, or -EINVAL for a
 * misaligned block (given back at once). */
int eachobs__arena_create(struct eachobs__arena **out,
			  const eachobs_allocator *a, size_t size,
			  unsigned nhold);
void eachobs__arena_ref(struct eachobs__arena *ar);
/* Drop a reference (NULL: nothing); the last frees the block. */
void eachobs__arena_unref(struct eachobs__arena *ar);
/* Any thread: item data goes back to the consumer, if it is still open. */
void eachobs__arena_give_back(struct eachobs__arena *ar, const void *data);
/* The consumer: call fn(arg, data) for every item given back since. */
void eachobs__arena_drain(struct eachobs__arena *ar,
			  void (*fn)(void *arg, const void *data), void *arg);
/* The iterator closes: items given back from now on are not taken in. */
void eachobs__arena_close(struct eachobs__arena *ar);

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

/* ---- slots ----------------------------------------------------------- */

/*
 * What a consumer is handed: cap observations' memory and what their
 * loaders said about them. Unbatched, cap is 1; batched, cap is batchsize
 * and the observations lie obs_size bytes apart in data. Entries are
 * written by the thread that loads them before the slot is handed over
 * (ck_ring enqueue, the release store of `turn`, or the acq_rel count of
 * `done` for a batch filled by several threads), and read by the consumer
 * after it took the slot over, so they need no atomics.
 */
struct eachobs__buf {
	unsigned char *data; /* 64-byte aligned */
	size_t *idx;         /* dataset index of each entry */
	size_t *len;         /* bytes getobs wrote (eachobs_set_length) */
	int *status;         /* what getobs returned, mapped to <= 0 */
	size_t count;        /* consumer only: entries it yields */
};

/*
 * A slot: the place one unit (an observation, or a batch) is loaded into.
 * In ordered hold mode the consumer swaps the loaded buffer out for a spare
 * one (hold.c), so `b` belongs to the slot only while the slot is not
 * yielded.
 */
struct eachobs__slot {
	struct eachobs__buf b;
	/* Ordered mode: slot s serves units s, s + W, s + 2W, ... For unit
	 * s + kW, turn is 2k while the slot waits to be loaded and 2k + 1 once
	 * loaded; the consumer moves it to 2k + 2 when it lets go. Compared
	 * for equality only, so it may wrap. */
	_Atomic uint32_t turn;
	struct eachobs__event ev; /* ordered: wakes on every change of turn */
	/* Batched: the unit being filled, and the sharing of its entries
	 * among threads (load.c). claim is generation << 32 | next entry to
	 * claim; a slot is open to helpers while that entry is below count. */
	_Atomic size_t unit;
	_Atomic size_t count;
	_Atomic size_t done;
	_Atomic uint64_t claim;
} EACHOBS__ALIGNED;

/* ---- ring.c: the unordered hand-off --------------------------------- */

/* A getobs under EACHOBS__CHEAP_NS is cheap: loaders then move up to
 * EACHOBS__RUN_MAX observations at a time (see ring.c). */
enum { EACHOBS__RUN_MAX = 16, EACHOBS__CHEAP_NS = 2000 };

struct eachobs__ring {
	ck_ring_t ready;                 /* loaded slots; workers -> consumer */
	ck_ring_t free;                  /* empty slots; consumer -> loaders */
	ck_ring_buffer_t *ready_buf;
	ck_ring_buffer_t *free_buf;
	pthread_mutex_t producer_lock;   /* serializes enqueues to `ready` */
	bool lock_ready;                 /* producer_lock was initialized */
	/* Room left for loaded slots: buffersize minus what waits in `ready`.
	 * A loader takes a credit before it enqueues, the consumer gives it
	 * back after it dequeued. This is what bounds the ready ring exactly,
	 * since a ck_ring's capacity is a power of two minus one. */
	_Atomic size_t credits EACHOBS__ALIGNED;
	/* The consumer sleeps on ev_ready (single-waiter protocol). */
	struct eachobs__event ev_ready EACHOBS__ALIGNED;
	struct eachobs__event ev_room EACHOBS__ALIGNED;  /* loaders sleep */
	struct eachobs__event ev_free;                   /* loaders, rarely */
};

/* ---- order.c: the ordered hand-off ---------------------------------- */

struct eachobs__order {
	_Atomic size_t next_claim EACHOBS__ALIGNED; /* first unclaimed index */
	/* The lowest index whose getobs failed, or n. Nothing at or above it
	 * is loaded any more: the consumer stops there. */
	_Atomic size_t limit EACHOBS__ALIGNED;
	size_t chunk;     /* indices a worker claims at once */
	size_t next;      /* consumer only: the index it yields next */
	unsigned waits;   /* consumer only: waits without helping */
	bool owes;        /* consumer only: a batch it opened may have entries
			   * left to claim (order.c, help) */
};

/* ---- pool.c: threads and deques ------------------------------------- */

/* A worker's deque: the indices [lo, hi) not yet claimed. The owner takes
 * tasks from the front, thieves from the back; both under `lock`. lo and hi
 * are atomics only so that thieves may read them unlocked to pick a victim. */
struct eachobs__deque {
	pthread_mutex_t lock;
	_Atomic size_t lo;
	_Atomic size_t hi;
} EACHOBS__ALIGNED;

struct eachobs__worker {
	struct eachobs__stats stats; /* first: it is cache-line aligned */
	eachobs_iter *it;
	unsigned self;
	bool borrowed;               /* runs on a thread of an eachobs_pool */
	bool created;                /* thread is ours to join */
	pthread_t thread;            /* when created */
	void *lent;                  /* when borrowed: the pool's thread */
};

struct eachobs__pool {
	struct eachobs__deque *deques; /* unordered only: one per worker */
	struct eachobs__worker *workers;
	unsigned nthreads;             /* workers to start */
	/* The eachobs_pool lending threads, or NULL; `borrowed` counts the
	 * lent threads still running a worker, under lender->lock. */
	eachobs_pool *lender;
	unsigned borrowed;
	/* Indices still in some deque; a worker leaves when it reaches 0. */
	_Atomic size_t unclaimed EACHOBS__ALIGNED;
	/* Workers wait on `ev_go` for `go` so that nothing loads before
	 * eachobs_parallel knows it will succeed. */
	_Atomic bool go;
	struct eachobs__event ev_go;
	/* Workers [0, nlent) run on lent threads, [nlent, nthreads) on
	 * threads of their own. */
	unsigned nlent;
};

/* ---- threads.c: persistent threads an eachobs_pool lends ------------- */

/* Run worker w on the calling thread until its iterator is done with it. */
void eachobs__worker_run(struct eachobs__worker *w);
/* Count it as a user of pool (eachobs_pool_destroy waits for none). */
void eachobs__lender_attach(eachobs_pool *pool);
void eachobs__lender_detach(eachobs_pool *pool);
unsigned eachobs__lender_size(const eachobs_pool *pool);
/* Give the iterator's workers [0, k) to k idle threads of pool, as many
 * idle ones as can take on its nice value (threads.c) up to
 * it->pool.nthreads, and set it->pool.nlent = k under
 * the pool's lock, so that a thread that sees its job early (it may,
 * harmlessly) also sees k. Each thread runs its worker once
 * eachobs__lender_wake wakes it. */
void eachobs__lender_reserve(eachobs_pool *pool, eachobs_iter *it);
void eachobs__lender_wake(struct eachobs__worker *w);
/* Consumer, before the gate opens: set cpus on the reserved thread of w;
 * -EAGAIN when the system refuses them (no CPU of the set is one the
 * process may use), as pthread_create does for a created worker. */
int eachobs__lender_check_cpus(struct eachobs__worker *w,
			       const cpu_set_t *cpus);
/* On lent thread w->lent, before it loads: run at the iterator's nice
 * value (best effort; 0: the pool's), until the worker is done. Call it
 * before waking other lent threads (threads.c says why). */
void eachobs__lender_renice(struct eachobs__worker *w, int nice);
/* On lent thread w->lent, before it loads: run on cpus, or the pool's
 * CPUs for NULL (cheap when the thread runs there already). */
void eachobs__lender_pin(struct eachobs__worker *w, const cpu_set_t *cpus);
/* Wait until no thread of pool runs a worker of it. */
void eachobs__lender_wait(eachobs_pool *pool, eachobs_iter *it);

/* ---- hold.c: what the consumer holds ---------------------------------- */

struct eachobs__held {
	struct eachobs__buf b;        /* as yielded */
	struct eachobs__slot *slot;   /* NULL when swapped out (ordered) */
	bool tensor;                  /* a DLPack tensor owns it (dlpack.c) */
};

struct eachobs__hold {
	bool automatic;               /* hold = 0: the next call gives back */
	unsigned max;                 /* K, or 1 when automatic */
	unsigned n;                   /* held now */
	struct eachobs__held *items;
	struct eachobs__buf *spares;  /* ordered with hold = K: free buffers */
	unsigned nspares;
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
	/* eachobs_interrupt calls so far; the consumer answers each change
	 * with one -EINTR (interrupts_seen is its own copy). */
	_Atomic uint32_t interrupts;
	/* Batched: units opened whose entries are not all claimed yet, so
	 * that a thread looking for one to help with need not scan every
	 * slot when there is none. */
	_Atomic size_t open_units EACHOBS__ALIGNED;
	struct eachobs__pool pool;
	struct eachobs__ring ring;
	struct eachobs__order order;
	struct eachobs__failrec fail;

	/* The consumer's own. */
	struct eachobs__hold hold EACHOBS__ALIGNED;
	size_t yielded;    /* unordered, SERIAL: units taken */
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
	size_t max_waiting;
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

/* hold.c */
size_t eachobs__hold_spares(bool ordered, unsigned hold);
/* Allocate the held list and, ordered with hold = K, K spare buffer
 * descriptors for the caller to point at memory. */
int eachobs__hold_init(eachobs_iter *it, unsigned hold);
void eachobs__hold_fini(eachobs_iter *it);
void eachobs__give_back(eachobs_iter *it, struct eachobs__slot *slot);
bool eachobs__hold_full(const eachobs_iter *it);
bool eachobs__hold_has(const eachobs_iter *it,
		       const struct eachobs__slot *slot);
const struct eachobs__buf *eachobs__hold_take(eachobs_iter *it,
					      struct eachobs__slot *slot);
const struct eachobs__buf *eachobs__hold_find(const eachobs_iter *it,
					      const void *data);
int eachobs__hold_release(eachobs_iter *it, const void *data);
/* Hand the held item at data to a tensor: *b its buffer; -EINVAL when it
 * is not a held item or a tensor has it already. */
int eachobs__hold_lend(eachobs_iter *it, const void *data,
		       struct eachobs__buf *b);
/* Take in the items that tensor deleters gave back. */
void eachobs__hold_drain(eachobs_iter *it);
void eachobs__hold_release_auto(eachobs_iter *it);


/* pool.c */
int eachobs__pool_init(eachobs_iter *it, unsigned nthreads);
int eachobs__pool_start(eachobs_iter *it);
/* Workers running (after a successful start): lent or created. */
unsigned eachobs__pool_started(const eachobs_iter *it);
void eachobs__pool_wake_all(eachobs_iter *it);
void eachobs__pool_join(eachobs_iter *it);
void eachobs__pool_fini(eachobs_iter *it);
/* Worker self (unordered): claim the next index, from its own deque or
 * stolen; false when no work is left. */
bool eachobs__pool_claim(eachobs_iter *it, unsigned self, size_t *idx);
/* The same for a run of up to max consecutive indices from its own deque
 * (a steal gives one); the count, 0 when no work is left. */
size_t eachobs__pool_claim_run(eachobs_iter *it, unsigned self, size_t max,
			       size_t *first);
/* Consumer (THREADED, unordered): take one unclaimed index, or a run of
 * up to max from the back of the richest deque (the count). */
bool eachobs__pool_take_one(eachobs_iter *it, size_t *idx);
size_t eachobs__pool_take_run(eachobs_iter *it, size_t max, size_t *first);

/* start.c and iter.c: eachobs_parallel_sized and eachobs_get_stats_sized
 * (abi.c) with the options and stats of this library's own size; o is
 * never NULL. */
int eachobs__parallel(eachobs_iter **itp, const eachobs_dataset *data,
		      const eachobs_options *o);
void eachobs__get_stats(const eachobs_iter *it, eachobs_stats *st);

/* ring.c */
int eachobs__ring_init(eachobs_iter *it);
void eachobs__ring_fini(eachobs_iter *it);
struct eachobs__slot *eachobs__ring_get_free(eachobs_iter *it);
struct eachobs__slot *eachobs__ring_try_get_free(eachobs_iter *it);
void eachobs__ring_put_free(eachobs_iter *it, struct eachobs__slot *slot);
bool eachobs__ring_put_ready(eachobs_iter *it, struct eachobs__slot *slot);
struct eachobs__slot *eachobs__ring_get_ready(eachobs_iter *it);
void eachobs__ring_wait_ready(eachobs_iter *it);
void eachobs__ring_wake_all(eachobs_iter *it);
/* Wake the consumer if it sleeps for a ready slot (it re-tests). */
void eachobs__ring_wake_consumer(eachobs_iter *it);
void eachobs__ring_worker(eachobs_iter *it, unsigned self);
/* THREADED consumer, unbatched, cheap getobs: load a run of pending
 * observations through the ready ring, as a worker would, without ever
 * waiting. The number loaded; sets *per_item_ns when it loaded any. */
size_t eachobs__ring_help_run(eachobs_iter *it, uint64_t *per_item_ns);

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

/* order.c */
void eachobs__order_init(eachobs_iter *it, size_t chunk);
void eachobs__order_worker(eachobs_iter *it, unsigned self);
int eachobs__order_next(eachobs_iter *it, struct eachobs__slot **out);
void eachobs__order_release(eachobs_iter *it, struct eachobs__slot *slot);
void eachobs__order_fail(eachobs_iter *it, size_t idx);
void eachobs__order_wake_all(eachobs_iter *it);

#endif /* EACHOBS_INTERNAL_H */
