/*
 * eachobs itself, driven through the peers' harness (peer.h), so that its
 * rows come from the same command line, the same getobs, the same
 * consumer checks and the same repetition rule as every peer's. Two
 * variants: THREADED (the consumer loads too) and BACKGROUND (only the P
 * workers load: the like-for-like one for a pool of P threads), each with
 * every other option at its default.
 */
#define _GNU_SOURCE

#include <eachobs.h>

#include "peer.h"

#include <string.h>

struct ctx {
	const struct peer_args *a;
	eachobs_executor ex;
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
		peer_die("index %zu yielded, but its slot holds %zu", idx,
			 stored);
	peer_seen_take(s, idx);
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
				       .ordered = a->ordered };
	struct peer_seen s;
	eachobs_iter *it;
	const void *obs;
	size_t idx = 0;
	uint64_t t0, t;
	int rc;

	(void)batch;
	peer_seen_init(&s, a->n, a->ordered);
	t0 = peer_now_ns();
	rc = eachobs_parallel(&it, &data, &opts);
	if (rc < 0)
		peer_die("eachobs_parallel: %s", eachobs_strerror(rc));
	while ((rc = eachobs_next(it, &obs, &idx)) == 1) {
		take(&s, obs, idx);
		if (a->kase == PEER_FIRST)
			break;
	}
	if (a->kase == PEER_FIRST) {
		t = peer_now_ns() - t0;
		eachobs_close(it);
		peer_seen_free(&s);
		return t;
	}
	if (rc < 0)
		peer_die("eachobs_next (index %zu): %s", idx,
			 eachobs_strerror(rc));
	eachobs_close(it);
	t = peer_now_ns() - t0;
	peer_seen_done(&s);
	return t;
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
	return 0;
}
