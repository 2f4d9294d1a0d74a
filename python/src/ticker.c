/*
 * The ticker (ticker.h). The consumer only stores `ticking` on each call;
 * the ticker sleeps untimed once it finds it clear, and the consumer
 * signals it only then, so a loop that calls next() often costs no
 * wake-ups.
 */
#include "ticker.h"

#include <time.h>

struct timespec ticker_deadline(long ms)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_nsec += ms * 1000000L;
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return t;
}

static void *ticker_main(void *arg)
{
	struct ticker *t = arg;

	pthread_mutex_lock(&t->lock);
	while (!t->quit) {
		if (!atomic_load(&t->ticking)) {
			/* idle, then ticking read again: a consumer that set
			 * ticking after the first read sees idle and signals
			 * (under the lock, so once this waits). */
			atomic_store(&t->idle, true);
			if (!atomic_load(&t->ticking))
				pthread_cond_wait(&t->cond, &t->lock);
			atomic_store(&t->idle, false);
			continue;
		}
		struct timespec d = ticker_deadline(TICK_MS);
		pthread_cond_timedwait(&t->cond, &t->lock, &d);
		eachobs_iter *it = atomic_load(t->it);
		if (atomic_load(&t->ticking) && it)
			eachobs_interrupt(it);
	}
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

int ticker_start(struct ticker *t, _Atomic(eachobs_iter *) *it)
{
	t->it = it;
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->cond, NULL);
	int rc = pthread_create(&t->thread, NULL, ticker_main, t);
	t->started = rc == 0;
	return rc;
}

void ticker_set(struct ticker *t, bool on)
{
	atomic_store(&t->ticking, on);
	if (!on || !atomic_load(&t->idle))
		return;
	pthread_mutex_lock(&t->lock);
	pthread_cond_signal(&t->cond);
	pthread_mutex_unlock(&t->lock);
}

void ticker_stop(struct ticker *t)
{
	if (!t->it)
		return;
	if (t->started) {
		pthread_mutex_lock(&t->lock);
		t->quit = true;
		pthread_cond_signal(&t->cond);
		pthread_mutex_unlock(&t->lock);
		pthread_join(t->thread, NULL);
		t->started = false;
	}
	pthread_cond_destroy(&t->cond);
	pthread_mutex_destroy(&t->lock);
	t->it = NULL;
}
