/*
 * Sleeping and waking.
 *
 * Threads that cannot go on (the consumer with nothing ready, a worker with
 * no room) first spin briefly, because on a busy pipeline the event is often
 * only a few hundred nanoseconds away and a futex round trip costs
 * microseconds. After that they sleep in the kernel, so a stalled pipeline
 * costs no CPU.
 */
#define _GNU_SOURCE
#include "base.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static void futex_wait(_Atomic uint32_t *word, uint32_t expected)
{
	/* EAGAIN (the word changed), EINTR and spurious wake-ups all just send
	 * the caller back to test its condition. */
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, NULL,
		NULL, 0);
}

/* The same, for at most ns nanoseconds. */
static void futex_wait_for(_Atomic uint32_t *word, uint32_t expected,
			   uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000u),
			       (long)(ns % 1000000000u) };

	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, &ts,
		NULL, 0);
}

static void futex_wake(_Atomic uint32_t *word, int n)
{
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, n, NULL, NULL,
		0);
}

EACHOBS__TLS struct eachobs__stats *eachobs__tls_stats;

struct eachobs__spin_budget eachobs__spins = {
	EACHOBS__CONSUMER_SPINS, EACHOBS__LOADER_SPINS, EACHOBS__ROOM_SPINS,
	false
};

static pthread_once_t calibrated = PTHREAD_ONCE_INIT;

unsigned eachobs__spins_scaled(unsigned count, uint64_t ns256)
{
	uint64_t n = (uint64_t)count * EACHOBS__PAUSE_NS * 256 /
		     (ns256 ? ns256 : 1);
	uint64_t lo = count / 8 ? count / 8 : 1, hi = (uint64_t)count * 8;

	n = n < lo ? lo : n > hi ? hi : n;
	return n > UINT_MAX ? UINT_MAX : (unsigned)n;
}

static void set_budget(_Atomic unsigned *budget, unsigned count,
		       uint64_t ns256)
{
	atomic_store_explicit(budget, eachobs__spins_scaled(count, ns256),
			      memory_order_relaxed);
}

/* The cheapest of a few runs of 256 turns of a spin, a pause and a
 * relaxed load as a spin's condition makes (tens of microseconds in all):
 * a run that a preemption or an interrupt lengthened is not the cheapest. */
static void calibrate(void)
{
	static _Atomic unsigned word;
	uint64_t best = UINT64_MAX;

	for (int r = 0; r < 5; r++) {
		uint64_t t0 = eachobs__now_ns();
		for (int i = 0; i < 256; i++) {
			if (atomic_load_explicit(&word, memory_order_relaxed))
				break;
			eachobs__cpu_relax();
		}
		uint64_t t = eachobs__now_ns() - t0;
		best = t < best ? t : best;
	}
	set_budget(&eachobs__spins.consumer, EACHOBS__CONSUMER_SPINS, best);
	set_budget(&eachobs__spins.loader, EACHOBS__LOADER_SPINS, best);
	set_budget(&eachobs__spins.room, EACHOBS__ROOM_SPINS, best);
	atomic_store_explicit(&eachobs__spins.measured, true,
			      memory_order_relaxed);
}

void eachobs__spins_calibrate(void)
{
	pthread_once(&calibrated, calibrate);
}

uint64_t eachobs__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The time waited, into this thread's stats (0 without any). */
static uint64_t wait_counted(struct eachobs__event *ev, eachobs__cond_fn cond,
			     const void *arg, unsigned spins)
{
	struct eachobs__stats *st = eachobs__tls_stats;

	if (cond(arg))
		return 0;
	uint64_t t0 = st ? eachobs__now_ns() : 0, t1;
	if (st)
		eachobs__idle_begin(st, t0);
	eachobs__event_wait(ev, cond, arg, spins);
	if (!st)
		return 0;
	t1 = eachobs__now_ns();
	eachobs__idle_end(st, t0, t1);
	return t1 - t0;
}

void eachobs__event_wait_timed(struct eachobs__event *ev, eachobs__cond_fn cond,
			       const void *arg, unsigned spins)
{
	wait_counted(ev, cond, arg, spins);
}

void eachobs__event_wait_room(struct eachobs__event *ev, eachobs__cond_fn cond,
			      const void *arg, unsigned spins)
{
	uint64_t ns = wait_counted(ev, cond, arg, spins);

	if (ns)
		eachobs__stat_add(&eachobs__tls_stats->room_ns, ns);
}

void eachobs__event_init(struct eachobs__event *ev)
{
	atomic_init(&ev->epoch, 0);
	atomic_init(&ev->waiters, 0);
}

/* The counting protocol's wait; slice_ns 0: each sleep lasts until a
 * notify, else at most slice_ns. */
static void wait_counting(struct eachobs__event *ev, eachobs__cond_fn cond,
			  const void *arg, unsigned spins, uint64_t slice_ns)
{
	for (unsigned i = 0; i < spins; i++) {
		if (cond(arg))
			return;
		eachobs__cpu_relax();
	}
	atomic_fetch_add_explicit(&ev->waiters, 1, memory_order_seq_cst);
	/* Pairs with the fence in eachobs__event_notify: our registration is
	 * ordered before the condition loads below. */
	atomic_thread_fence(memory_order_seq_cst);
	for (;;) {
		uint32_t key =
			atomic_load_explicit(&ev->epoch, memory_order_acquire);
		if (cond(arg))
			break;
		/* A notify that comes after our key was read bumps epoch, so
		 * the kernel refuses to sleep on the stale key. */
		if (slice_ns)
			futex_wait_for(&ev->epoch, key, slice_ns);
		else
			futex_wait(&ev->epoch, key);
	}
	atomic_fetch_sub_explicit(&ev->waiters, 1, memory_order_relaxed);
}

void eachobs__event_wait(struct eachobs__event *ev, eachobs__cond_fn cond,
			 const void *arg, unsigned spins)
{
	wait_counting(ev, cond, arg, spins, 0);
}

/*
 * A waiter for something that should never take long to come (an empty
 * item that a producer's credit guarantees) sleeps in slices, so that
 * its notifier may skip the fence: the fence was the dearest part of
 * giving an item back, once per item, for a wait that almost never
 * happens. A notification the waiter misses costs it at most one slice.
 */
void eachobs__event_wait_sliced(struct eachobs__event *ev,
				eachobs__cond_fn cond, const void *arg,
				unsigned spins, uint64_t slice_ns)
{
	wait_counting(ev, cond, arg, spins, slice_ns ? slice_ns : 1);
}

void eachobs__event_notify_lazy(struct eachobs__event *ev, int nwake)
{
	if (atomic_load_explicit(&ev->waiters, memory_order_relaxed) == 0)
		return;
	atomic_fetch_add_explicit(&ev->epoch, 1, memory_order_release);
	futex_wake(&ev->epoch, nwake);
}

void eachobs__event_notify(struct eachobs__event *ev, int nwake)
{
	/* Orders the caller's change of the condition before the load of
	 * waiters (a store-load barrier; see eachobs__event_wait). */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&ev->waiters, memory_order_relaxed) == 0)
		return;
	atomic_fetch_add_explicit(&ev->epoch, 1, memory_order_release);
	futex_wake(&ev->epoch, nwake);
}

/*
 * The single-waiter variant, for an event only one thread ever waits on
 * (the consumer's ev_ready). Bit 0 of epoch says "someone sleeps"; the first
 * notifier that finds it set clears it while bumping the epoch, so the ones
 * that follow before the sleeper is back make no system call. With the
 * counting protocol above, every slot that arrived between the wake and the
 * sleeper's return paid a futex wake: several per sleep (docs/design.md,
 * Waiting and waking).
 */
bool eachobs__event_wait_single(struct eachobs__event *ev,
				eachobs__cond_fn cond, const void *arg,
				unsigned spins)
{
	for (unsigned i = 0; i < spins; i++) {
		if (cond(arg))
			return false;
		eachobs__cpu_relax();
	}
	for (;;) {
		/* Pairs with the fence in eachobs__event_notify_single. */
		uint32_t key = atomic_fetch_or_explicit(&ev->epoch, 1,
							memory_order_seq_cst) |
			       1;
		/* The flag store must be ordered before the condition's loads
		 * (store-load), which only a full fence promises everywhere. */
		atomic_thread_fence(memory_order_seq_cst);
		if (cond(arg)) {
			/* Leave no stale flag that would cost the next
			 * notifier a system call; if this fails, a notifier
			 * already cleared it. */
			atomic_compare_exchange_strong_explicit(
				&ev->epoch, &key, key & ~1u,
				memory_order_relaxed, memory_order_relaxed);
			return true;
		}
		futex_wait(&ev->epoch, key);
	}
}

/*
 * A sleep of at most ns on a single-waiter event, after no spin: the
 * waiter has decided to sleep a while whatever comes. Notifiers still see
 * the flag and test their condition, so the owner's wake (no condition)
 * ends it at once; the flag is cleared on the way out, so that no
 * notifier pays a system call for a sleeper that left.
 */
void eachobs__event_nap_single(struct eachobs__event *ev,
			       eachobs__cond_fn cond, const void *arg,
			       uint64_t ns)
{
	uint32_t key = atomic_fetch_or_explicit(&ev->epoch, 1,
						memory_order_seq_cst) |
		       1;

	/* As in eachobs__event_wait_single: the flag before the loads. */
	atomic_thread_fence(memory_order_seq_cst);
	if (!cond(arg))
		futex_wait_for(&ev->epoch, key, ns);
	atomic_compare_exchange_strong_explicit(&ev->epoch, &key, key & ~1u,
						memory_order_relaxed,
						memory_order_relaxed);
}

void eachobs__event_notify_single(struct eachobs__event *ev,
				  eachobs__cond_fn cond, const void *arg)
{
	atomic_thread_fence(memory_order_seq_cst);
	/* Acquire: a flag read from the sleeper's fetch_or comes with what
	 * it wrote before (what cond tests, e.g. that it no longer naps). */
	uint32_t v = atomic_load_explicit(&ev->epoch, memory_order_acquire);
	if (!(v & 1))
		return;
	if (cond && !cond(arg))
		return;
	/* If this fails, another notifier bumped the epoch and wakes. */
	if (atomic_compare_exchange_strong_explicit(&ev->epoch, &v,
						    (v + 2) & ~1u,
						    memory_order_release,
						    memory_order_relaxed))
		futex_wake(&ev->epoch, 1);
}
