/*
 * The ticker: while the consumer waits in the library, a thread that
 * calls eachobs_interrupt() every TICK_MS, so that the wait returns -EINTR
 * and the consumer can run Python's signal handlers (which run only on the
 * main thread, between bytecodes, never while it waits in C).
 */
#ifndef EACHOBS_PY_TICKER_H
#define EACHOBS_PY_TICKER_H

#include <eachobs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

enum { TICK_MS = 20 };

struct ticker {
	_Atomic(eachobs_iter *) *it; /* whom to interrupt (NULL: nobody) */
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool started, quit;          /* under lock */
	atomic_bool ticking;         /* the consumer waits in the library */
	atomic_bool idle;            /* the ticker sleeps untimed */
};

/* Start the thread (without one, the ticker does nothing: Ctrl-C then
 * waits for the item). 0, or an errno value. */
int ticker_start(struct ticker *t, _Atomic(eachobs_iter *) *it);
/* The consumer enters (on) or leaves (off) a wait in the library: an
 * atomic store, and a signal only when the ticker sleeps untimed. */
void ticker_set(struct ticker *t, bool on);
/* Stop and join the thread; any time after ticker_start. */
void ticker_stop(struct ticker *t);

/* An absolute CLOCK_REALTIME deadline ms milliseconds from now. */
struct timespec ticker_deadline(long ms);

#endif /* EACHOBS_PY_TICKER_H */
