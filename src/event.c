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
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

static void futex_wait(_Atomic uint32_t *word, uint32_t expected)
{
	/* EAGAIN (the word changed), EINTR and spurious wake-ups all just send
	 * the caller back to test its condition. */
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, NULL,
		NULL, 0);
}

static void futex_wake(_Atomic uint32_t *word, int n)
{
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, n, NULL, NULL,
		0);
}

void eachobs__event_init(struct eachobs__event *ev)
{
	atomic_init(&ev->epoch, 0);
	atomic_init(&ev->waiters, 0);
}

void eachobs__event_wait(struct eachobs__event *ev, eachobs__cond_fn cond,
			 const void *arg, unsigned spins)
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
		futex_wait(&ev->epoch, key);
	}
	atomic_fetch_sub_explicit(&ev->waiters, 1, memory_order_relaxed);
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
