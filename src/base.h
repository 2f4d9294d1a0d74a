/*
 * What every mechanism of the library uses, and nothing of the iterator:
 * cache-line alignment, thread-locals, event counts (sleeping and waking),
 * clocks and per-thread stats, allocation and thread creation.
 */
#ifndef EACHOBS_BASE_H
#define EACHOBS_BASE_H

#include "eachobs.h"

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

/* Thread j (0-based) of n could not be created: eachobs__thread_create's
 * err (positive), the stack size and the affinity it was given (or NULL).
 * fn is the public function that failed, or NULL for an option's message;
 * what names the thread ("worker thread", "thread"). Returns -ENOMEM for
 * ENOMEM (the thread's attributes could not be allocated), else -EAGAIN. */
int eachobs__fail_thread(int err, const char *fn, const char *what,
			 unsigned j, unsigned n, size_t stack_size,
			 const cpu_set_t *cpus) __attribute__((cold));

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
 * cond means "always". The wait returns whether its spins were spent
 * (it slept, or was about to). */
bool eachobs__event_wait_single(struct eachobs__event *ev,
				eachobs__cond_fn cond, const void *arg,
				unsigned spins);
void eachobs__event_notify_single(struct eachobs__event *ev,
				  eachobs__cond_fn cond, const void *arg);
/* The single waiter: sleep at most ns unless cond(arg) holds already; a
 * notify whose condition holds, or one without a condition, ends it. */
void eachobs__event_nap_single(struct eachobs__event *ev,
			       eachobs__cond_fn cond, const void *arg,
			       uint64_t ns);

/* Spins before sleeping, in pauses of EACHOBS__PAUSE_NS (what one took
 * where these were measured): a few microseconds for the consumer, which
 * is on the critical path, less for loaders, which are many and share the
 * cores with the consumer. Longer spins measured no better (docs/design.md,
 * Measurements). */
enum { EACHOBS__CONSUMER_SPINS = 128, EACHOBS__LOADER_SPINS = 32 };
/* A loader without room (a full buffer or window) waits this many pauses
 * (a few microseconds) for the first bit of room before it sleeps until
 * half is free: with a consumer that takes an item in tens of
 * nanoseconds, the half it had left lasted less than the wake-up of a
 * sleeping loader, and the consumer waited, a context switch each side
 * per half buffer. */
enum { EACHOBS__ROOM_SPINS = 256 };
/* One of every this many of those pauses is a sched_yield (window.c): a
 * room spin makes EACHOBS__ROOM_SPINS / EACHOBS__ROOM_YIELD yields however
 * its budget is scaled. */
enum { EACHOBS__ROOM_YIELD = 32 };
/* A pause costs from a cycle (aarch64's yield) to 140 (x86 since Skylake),
 * so the counts above are scaled to what one turn of a spin (a pause and
 * a load) costs on this CPU, once per process (eachobs__spins_calibrate):
 * a spin lasts about as long, in time, everywhere, within 1/8 and 8 times
 * the count. */
enum { EACHOBS__PAUSE_NS = 25 };
/* On a line of its own: read by every spin, and no neighbour's write
 * should cost those reads a miss. */
struct eachobs__spin_budget {
	_Alignas(64) _Atomic unsigned consumer;
	_Atomic unsigned loader, room;
	_Atomic bool measured; /* scaled to this CPU's pause */
};
_Static_assert(sizeof(struct eachobs__spin_budget) == 64,
	       "the spin budgets fill one cache line");
extern struct eachobs__spin_budget eachobs__spins;
/* Measure a pause and scale the budgets; the first call does it, every
 * later one returns at once. Before it, the budgets are the counts. */
void eachobs__spins_calibrate(void);
/* A budget of count pauses of EACHOBS__PAUSE_NS in pauses that take
 * ns256 / 256 ns: within count / 8 (a pause measured across preemptions)
 * and count * 8 (one that costs next to nothing, where the condition a
 * spin tests costs more than it), at least 1, at most UINT_MAX. */
unsigned eachobs__spins_scaled(unsigned count, uint64_t ns256);
static inline unsigned eachobs__consumer_spins(void)
{
	return atomic_load_explicit(&eachobs__spins.consumer,
				    memory_order_relaxed);
}
static inline unsigned eachobs__loader_spins(void)
{
	return atomic_load_explicit(&eachobs__spins.loader,
				    memory_order_relaxed);
}
static inline unsigned eachobs__room_spins(void)
{
	return atomic_load_explicit(&eachobs__spins.room,
				    memory_order_relaxed);
}
/* An ordered loader whose place the consumer, at its pace, frees only
 * after this long sleeps at once instead of spinning: the spin would end
 * in a sleep anyway, and with many loaders their spins took the cores
 * from the consumer (window.c). */
#define EACHOBS__ROOM_FAR_NS 20000u
/* A consumer whose items come between NAP_GAP_MIN and NAP_GAP_MAX ns
 * apart (longer than its spins, shorter than a wake-up's worth of work)
 * naps for a run of NAP_RUN of them, at most NAP_MAX_NS, instead of
 * being woken for each (handoff.c). */
enum {
	EACHOBS__NAP_GAP_MIN = 2000,
	EACHOBS__NAP_GAP_MAX = 25000,
	EACHOBS__NAP_RUN = 8,
	EACHOBS__NAP_MAX_NS = 200000
};

void eachobs__event_init(struct eachobs__event *ev);
/* Return once cond(arg) is true: spin about `spins` times, then sleep. */
void eachobs__event_wait(struct eachobs__event *ev, eachobs__cond_fn cond,
			 const void *arg, unsigned spins);
/* Wake up to nwake sleepers if there are any (call after changing the
 * condition). Cheap when nobody waits: a fence and a load. */
void eachobs__event_notify(struct eachobs__event *ev, int nwake);
/* For a wait that should end almost at once: sleep in slices of slice_ns,
 * testing cond between them, so that the notifier may use notify_lazy,
 * which costs no fence but may be missed (for at most a slice). */
void eachobs__event_wait_sliced(struct eachobs__event *ev,
				eachobs__cond_fn cond, const void *arg,
				unsigned spins, uint64_t slice_ns);
void eachobs__event_notify_lazy(struct eachobs__event *ev, int nwake);
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
	_Atomic uint64_t room_ns;   /* of idle_ns: waiting for room */
	/* When the wait going on began (0: none), so that a long wait is
	 * seen before it ends (autotune). */
	_Atomic uint64_t idle_since;
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
/* Any thread: a stat as far as it has been written. */
static inline uint64_t eachobs__stat_read(const _Atomic uint64_t *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}
/* A wait of this thread from t0 (idle_since), and its end at t1 (into
 * idle_ns). */
static inline void eachobs__idle_begin(struct eachobs__stats *st, uint64_t t0)
{
	atomic_store_explicit(&st->idle_since, t0, memory_order_relaxed);
}
static inline void eachobs__idle_end(struct eachobs__stats *st, uint64_t t0,
				     uint64_t t1)
{
	eachobs__stat_add(&st->idle_ns, t1 - t0);
	atomic_store_explicit(&st->idle_since, 0, memory_order_relaxed);
}
/* Time st has spent waiting until now, the wait going on included. */
static inline uint64_t eachobs__idle_until(const struct eachobs__stats *st,
					   uint64_t now)
{
	uint64_t since = eachobs__stat_read(&st->idle_since);
	uint64_t done = eachobs__stat_read(&st->idle_ns);

	return done + (since && now > since ? now - since : 0);
}
/* eachobs__event_wait, adding the time to this thread's idle_ns when the
 * condition did not hold at once (so the fast path reads no clock). */
void eachobs__event_wait_timed(struct eachobs__event *ev, eachobs__cond_fn cond,
			       const void *arg, unsigned spins);
/* The same for a loader waiting for room: the time also goes to room_ns
 * (autotune tells a buffer too shallow by it). */
void eachobs__event_wait_room(struct eachobs__event *ev, eachobs__cond_fn cond,
			      const void *arg, unsigned spins);

/* ---- lowering a bound ----------------------------------------------- */

/* Lower *w to v with order on success; never raise it. True when this
 * call lowered it. */
static inline bool eachobs__atomic_lower(_Atomic size_t *w, size_t v,
					 memory_order order)
{
	size_t cur = atomic_load_explicit(w, memory_order_relaxed);

	while (v < cur)
		if (atomic_compare_exchange_weak_explicit(w, &cur, v, order,
							  memory_order_relaxed))
			return true;
	return false;
}

/* ---- alloc.c -------------------------------------------------------- */

void *eachobs__calloc(size_t nmemb, size_t size);
/* size bytes aligned to a cache line; NULL on failure. */
void *eachobs__alloc_aligned(size_t size);
void eachobs__free(void *p);
/* pthread_create with that stack size and, unless cpus is NULL, that CPU
 * affinity, with asynchronous signals blocked; returns 0 or a positive
 * errno like pthread_create (ENOMEM: the attributes' own allocation). */
int eachobs__thread_create(pthread_t *t, size_t stack_size,
			   const cpu_set_t *cpus, void *(*fn)(void *),
			   void *arg);

#endif /* EACHOBS_BASE_H */
