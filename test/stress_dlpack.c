/*
 * DLPack tensors under threads: random iterators (executor, ordering,
 * batch size, hold, thread count, pool) whose every item becomes a tensor
 * that a second thread reads and deletes while the consumer goes on; a
 * few tensors are left alive past eachobs_close and deleted afterwards.
 * A plain main(), so that it also runs under ThreadSanitizer.
 *
 * usage: stress_dlpack [ITERATORS [SEED]]   (default 200, 1)
 */
#define _GNU_SOURCE
#include "eachobs.h"
#include "eachobs_dlpack.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 400
#define QCAP 64

static _Noreturn void fail(const char *what, unsigned long long seed)
{
	fprintf(stderr, "stress_dlpack: FAIL (seed %llu): %s\n", seed, what);
	exit(1);
}

static size_t numobs(void *ctx)
{
	(void)ctx;
	return N;
}

static int getobs(void *ctx, size_t idx, void *obs)
{
	(void)ctx;
	*(uint64_t *)obs = idx;
	return 0;
}

struct queue {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	DLManagedTensor *t[QCAP];
	unsigned head, tail;
	int done;
	unsigned char seen[N];
};

static void *device(void *arg)
{
	struct queue *q = arg;

	pthread_mutex_lock(&q->lock);
	for (;;) {
		while (q->head == q->tail && !q->done)
			pthread_cond_wait(&q->cond, &q->lock);
		if (q->head == q->tail)
			break;
		DLManagedTensor *t = q->t[q->head++ % QCAP];
		pthread_mutex_unlock(&q->lock);
		const uint64_t *x = t->dl_tensor.data;
		int64_t count = t->dl_tensor.ndim == 2 ? t->dl_tensor.shape[0] : 1;
		for (int64_t j = 0; j < count; j++)
			q->seen[x[j]]++;
		t->deleter(t);
		pthread_mutex_lock(&q->lock);
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

static uint64_t next_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void one(unsigned long long seed, eachobs_pool *pool)
{
	static const size_t sizes[] = { 0, 1, 7, 32 };
	uint64_t s = seed;
	eachobs_options o = {
		.nthreads = 1 + (unsigned)(next_rand(&s) % 4),
		.executor = (eachobs_executor)(next_rand(&s) % 3),
		.ordered = next_rand(&s) % 2,
		.batchsize = sizes[next_rand(&s) % 4],
		.hold = 1 + (unsigned)(next_rand(&s) % 4),
		.pool = next_rand(&s) % 3 == 0 ? pool : NULL,
	};
	eachobs_dataset data = { NULL, numobs, getobs, sizeof(uint64_t) };
	struct queue q = { .lock = PTHREAD_MUTEX_INITIALIZER,
			   .cond = PTHREAD_COND_INITIALIZER };
	DLManagedTensor *late[4];
	unsigned nlate = 0, keep = (unsigned)(next_rand(&s) % 2);
	int64_t one_obs[] = { 1 };
	eachobs_iter *it;
	pthread_t th;
	int rc;

	if (eachobs_parallel(&it, &data, &o) != 0)
		fail("start", seed);
	if (pthread_create(&th, NULL, device, &q) != 0)
		fail("pthread_create", seed);
	for (;;) {
		const void *p;
		if (o.batchsize) {
			eachobs_batch b;
			rc = eachobs_next_batch(it, &b);
			p = b.data;
		} else {
			rc = eachobs_next(it, &p, NULL);
		}
		if (rc == -ENOBUFS) { /* every held item on the device */
			sched_yield();
			continue;
		}
		if (rc != 1)
			break;
		DLManagedTensor *t;
		if (eachobs_dlpack(it, p, (DLDataType){ kDLUInt, 64, 1 }, 1,
				   one_obs, &t) != 0)
			fail(eachobs_last_error(), seed);
		if (keep && nlate < o.hold - 1 && nlate < 4) {
			late[nlate++] = t; /* kept past close */
			continue;
		}
		pthread_mutex_lock(&q.lock);
		q.t[q.tail++ % QCAP] = t;
		pthread_cond_signal(&q.cond);
		pthread_mutex_unlock(&q.lock);
	}
	if (rc != 0)
		fail("the iteration did not end with 0", seed);
	pthread_mutex_lock(&q.lock);
	q.done = 1;
	pthread_cond_signal(&q.cond);
	pthread_mutex_unlock(&q.lock);
	eachobs_close(it); /* while the device may still be deleting */
	pthread_join(th, NULL);
	for (unsigned i = 0; i < nlate; i++) {
		const uint64_t *x = late[i]->dl_tensor.data;
		int64_t count = late[i]->dl_tensor.ndim == 2
					? late[i]->dl_tensor.shape[0] : 1;
		for (int64_t j = 0; j < count; j++)
			q.seen[x[j]]++;
		late[i]->deleter(late[i]);
	}
	for (size_t i = 0; i < N; i++)
		if (q.seen[i] != 1)
			fail("an index not seen exactly once", seed);
}

int main(int argc, char **argv)
{
	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf("usage: %s [ITERATORS [SEED]]\n"
		       "DLPack tensors deleted on another thread and after "
		       "close, over random iterators.\n", argv[0]);
		return 0;
	}
	if (argc > 1 && argv[1][0] == '-') {
		fprintf(stderr, "usage: %s [ITERATORS [SEED]] (try --help)\n",
			argv[0]);
		return 2;
	}
	unsigned long long iters = argc > 1 ? strtoull(argv[1], NULL, 10) : 200;
	unsigned long long seed = argc > 2 ? strtoull(argv[2], NULL, 10) : 1;
	eachobs_pool *pool;

	if (eachobs_pool_create(&pool, 3) != 0)
		fail("pool", seed);
	for (unsigned long long k = 0; k < iters; k++)
		one(seed * 1000003 + k, pool);
	eachobs_pool_destroy(pool);
	printf("stress_dlpack: %llu iterators, seed %llu: ok\n", iters, seed);
	return 0;
}
