/*
 * The reference, not a loader: P plain threads take indices from an
 * atomic counter and call getobs, with no hand-off and no consumer. What
 * the machine itself allows P threads doing this getobs, measured in the
 * same run as the loaders (tools/plots.sh divides by it), so that a
 * sleep that takes longer on a busy machine moves both alike.
 * bench/timedataset's bare-thr is the same thing for its cases.
 */
#define _GNU_SOURCE

#include "peer.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

struct bare {
	const struct peer_args *a;
	atomic_size_t next; /* the next index to claim */
	atomic_size_t done; /* getobs calls that returned */
};

static void *worker(void *arg)
{
	struct bare *b = arg;
	size_t i;

	while ((i = atomic_fetch_add(&b->next, 1)) < b->a->n) {
		peer_getobs(b->a->t_ns, i);
		atomic_fetch_add(&b->done, 1);
	}
	return NULL;
}

static uint64_t run(const struct peer_args *a, unsigned p, unsigned batch,
		    void *arg)
{
	struct bare b = { .a = a };
	pthread_t *th = malloc(p * sizeof(*th));
	uint64_t t0;

	(void)batch;
	(void)arg;
	if (th == NULL)
		die("out of memory");
	if (a->kase == PEER_FIRST)
		die("no first-item case: nothing is handed over");
	atomic_init(&b.next, 0);
	atomic_init(&b.done, 0);
	t0 = now_ns();
	for (unsigned i = 0; i < p; i++)
		if (pthread_create(&th[i], NULL, worker, &b) != 0)
			die("pthread_create failed");
	for (unsigned i = 0; i < p; i++)
		pthread_join(th[i], NULL);
	uint64_t t = now_ns() - t0;
	if (atomic_load(&b.done) != a->n)
		die("%zu of %zu getobs calls ran", atomic_load(&b.done),
		    a->n);
	free(th);
	return t;
}

int main(int argc, char **argv)
{
	struct peer_args a;

	peer_parse_args(argc, argv, &a, "peer_bare");
	peer_measure(&a, "bare", "threads", false, "", run, NULL);
	return 0;
}
