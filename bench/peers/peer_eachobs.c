/*
 * eachobs itself, driven through the peers' harness (peer.h), so that its
 * rows come from the same command line, the same getobs, the same
 * consumer checks and the same repetition rule as every peer's. Four
 * variants: THREADED (the consumer loads too) and BACKGROUND (only the P
 * workers load: the like-for-like one for a pool of P threads), each with
 * every other option at its default; "pool", BACKGROUND on threads of an
 * eachobs_pool created before the clock starts (as TBB keeps its threads
 * between pipelines); and "b64", THREADED in batches of 64 read with
 * eachobs_next_batch (libtorch's and PyTorch's batch 64). For the first
 * item case, b64 times the first batch.
 */
#define _GNU_SOURCE

#include <eachobs.h>

#include "peer.h"

#include <string.h>

struct ctx {
	const struct peer_args *a;
	eachobs_executor ex;
	eachobs_pool *pool;
	size_t batchsize;
};

static size_t numobs(void *ctx)
{
	return ((const struct ctx *)ctx)->a->n;
}

static int getobs(void *ctx, size_t idx, void *obs)
{
	const struct ctx *c = ctx;
	size_t v = peer_getobs(c->a->t_ns, idx);

	memcpy(obs, &v, sizeof(v));
	return 0;
}

static void take(struct peer_seen *s, const void *obs, size_t idx)
{
	size_t stored;

	memcpy(&stored, obs, sizeof(stored));
	if (stored != idx)
		die("index %zu yielded, but its slot holds %zu", idx,
		    stored);
	peer_seen_take(s, idx);
}

/* One observation, or one batch: 1, 0 at the end, or < 0. */
static int next(eachobs_iter *it, size_t batchsize, struct peer_seen *s,
		size_t *idx)
{
	const void *obs;
	int rc;

	if (!batchsize) {
		rc = eachobs_next(it, &obs, idx);
		if (rc == 1)
			take(s, obs, *idx);
		return rc;
	}
	eachobs_batch b;
	rc = eachobs_next_batch(it, &b);
	for (size_t j = 0; rc == 1 && j < b.count; j++)
		take(s, (const size_t *)b.data + j, b.idx[j]);
	if (rc < 0 && b.idx)
		*idx = b.idx[0];
	return rc;
}

static uint64_t run(const struct peer_args *a, unsigned p, unsigned batch,
		    void *arg)
{
	struct ctx *c = arg;
	const eachobs_dataset data = { .ctx = c,
				       .numobs = numobs,
				       .getobs = getobs,
				       .obs_size = sizeof(size_t) };
	const eachobs_options opts = { .nthreads = p,
				       .executor = c->ex,
				       .ordered = a->ordered,
				       .pool = c->pool,
				       .batchsize = c->batchsize };
	struct peer_seen s;
	eachobs_iter *it;
	size_t idx = 0;
	uint64_t t0, t;
	int rc;

	(void)batch;
	peer_seen_init(&s, a->n, a->ordered);
	t0 = now_ns();
	rc = eachobs_parallel(&it, &data, &opts);
	if (rc < 0)
		die("eachobs_parallel: %s", eachobs_strerror(rc));
	while ((rc = next(it, c->batchsize, &s, &idx)) == 1)
		if (a->kase == PEER_FIRST)
			break;
	t = now_ns() - t0;
	if (a->kase != PEER_FIRST && rc < 0)
		die("eachobs_next (index %zu): %s", idx,
		    eachobs_strerror(rc));
	eachobs_close(it);
	return peer_seen_finish(&s, a->kase == PEER_FIRST, t, t0);
}

int main(int argc, char **argv)
{
	struct peer_args a;
	struct ctx c = { .a = &a };

	peer_parse_args(argc, argv, &a, "peer_eachobs");
	c.ex = EACHOBS_THREADED;
	peer_measure(&a, "eachobs", "threaded", false, "", run, &c);
	c.ex = EACHOBS_BACKGROUND;
	peer_measure(&a, "eachobs", "background", false, "", run, &c);
	unsigned most = 1;
	for (size_t i = 0; i < a.nthreads; i++)
		most = a.threads[i] > most ? a.threads[i] : most;
	if (eachobs_pool_create(&c.pool, most) < 0)
		die("eachobs_pool_create failed");
	peer_measure(&a, "eachobs", "pool", false, "", run, &c);
	eachobs_pool_destroy(c.pool);
	c.pool = NULL;
	c.ex = EACHOBS_THREADED;
	c.batchsize = 64;
	peer_measure(&a, "eachobs", "b64", false, "", run, &c);
	return 0;
}
