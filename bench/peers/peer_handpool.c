/*
 * Peer (a): the pool every C programmer writes. P threads take indices
 * from an atomic counter, call getobs, and push the result into a bounded
 * queue guarded by one mutex and two condition variables; the consumer
 * pops. No batching, no spinning, a signal per push and per pop. The
 * queue holds max(16, 4 * P) items, eachobs's default buffersize, so the
 * two differ in machinery and not in memory. Unordered only: keeping
 * order is where hand-written pools stop being short.
 */
#define _GNU_SOURCE

#include "peer.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct pool {
	const struct peer_args *a;
	atomic_size_t next; /* the next index to claim */
	pthread_mutex_t mu; /* guards everything below */
	pthread_cond_t not_empty, not_full;
	size_t *q, cap, head, count;
	unsigned live; /* workers that have not exited */
	bool stop;     /* the consumer stopped early */
};

static void *worker(void *arg)
{
	struct pool *pl = arg;
	size_t i;

	while ((i = atomic_fetch_add(&pl->next, 1)) < pl->a->n) {
		size_t v = peer_getobs(pl->a->t_ns, i);

		pthread_mutex_lock(&pl->mu);
		while (pl->count == pl->cap && !pl->stop)
			pthread_cond_wait(&pl->not_full, &pl->mu);
		if (pl->stop) {
			pthread_mutex_unlock(&pl->mu);
			break;
		}
		pl->q[(pl->head + pl->count++) % pl->cap] = v;
		pthread_cond_signal(&pl->not_empty);
		pthread_mutex_unlock(&pl->mu);
	}
	pthread_mutex_lock(&pl->mu);
	if (--pl->live == 0)
		pthread_cond_signal(&pl->not_empty);
	pthread_mutex_unlock(&pl->mu);
	return NULL;
}

/* 1 and *v: an item; 0: every worker has exited and the queue is empty. */
static int pop(struct pool *pl, size_t *v)
{
	pthread_mutex_lock(&pl->mu);
	while (pl->count == 0 && pl->live > 0)
		pthread_cond_wait(&pl->not_empty, &pl->mu);
	if (pl->count == 0) {
		pthread_mutex_unlock(&pl->mu);
		return 0;
	}
	*v = pl->q[pl->head];
	pl->head = (pl->head + 1) % pl->cap;
	pl->count--;
	pthread_cond_signal(&pl->not_full);
	pthread_mutex_unlock(&pl->mu);
	return 1;
}

static uint64_t run(const struct peer_args *a, unsigned p, unsigned batch,
		    void *arg)
{
	struct pool pl = { .a = a, .cap = 4u * p < 16 ? 16 : 4u * p,
			   .live = p };
	pthread_t *th = malloc(p * sizeof(*th));
	struct peer_seen s;
	uint64_t t0, t = 0;
	size_t v;

	(void)batch;
	(void)arg;
	pl.q = malloc(pl.cap * sizeof(*pl.q));
	if (th == NULL || pl.q == NULL)
		die("out of memory");
	peer_seen_init(&s, a->n, false);
	atomic_init(&pl.next, 0);
	t0 = now_ns();
	pthread_mutex_init(&pl.mu, NULL);
	pthread_cond_init(&pl.not_empty, NULL);
	pthread_cond_init(&pl.not_full, NULL);
	for (unsigned i = 0; i < p; i++)
		if (pthread_create(&th[i], NULL, worker, &pl) != 0)
			die("pthread_create failed");
	while (pop(&pl, &v)) {
		peer_seen_take(&s, v);
		if (a->kase == PEER_FIRST) {
			t = now_ns() - t0;
			pthread_mutex_lock(&pl.mu);
			pl.stop = true;
			pthread_cond_broadcast(&pl.not_full);
			pthread_mutex_unlock(&pl.mu);
			break;
		}
	}
	for (unsigned i = 0; i < p; i++)
		pthread_join(th[i], NULL);
	pthread_cond_destroy(&pl.not_full);
	pthread_cond_destroy(&pl.not_empty);
	pthread_mutex_destroy(&pl.mu);
	t = peer_seen_finish(&s, a->kase == PEER_FIRST, t, t0);
	free(pl.q);
	free(th);
	return t;
}

int main(int argc, char **argv)
{
	struct peer_args a;

	peer_parse_args(argc, argv, &a, "peer_handpool");
	/* Ordered is not something this pool does: print nothing, and the
	 * table shows the cell empty. */
	if (a.ordered)
		return 0;
	peer_measure(&a, "handpool", "mutex+condvar", false, "", run, NULL);
	return 0;
}
