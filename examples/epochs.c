/*
 * A training loop over several epochs: one pool of threads for the whole
 * run, a shuffled order every epoch, batches collated in place, token
 * sequences of varying length, per-observation randomness that does not
 * depend on the thread count, and a validation pass that holds two
 * batches at once. Ctrl-C stops it within a few milliseconds, also while
 * it waits for a batch. Run it with no arguments; it exits 0 when every
 * check holds.
 */
#define _POSIX_C_SOURCE 200809L
#include <eachobs.h>

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define MAX_TOKENS 64

/* A corpus of "sentences": sentence idx has 8 + idx % 57 tokens. */
struct corpus {
	size_t n;
	unsigned long long seed, epoch; /* what this pass augments with */
};

static size_t corpus_numobs(void *ctx)
{
	return ((struct corpus *)ctx)->n;
}

static int corpus_getobs(void *ctx, size_t idx, void *obs)
{
	const struct corpus *c = ctx;
	uint16_t *tokens = obs;
	size_t len = 8 + idx % 57;
	/* Randomness from (seed, epoch, idx) only: the same on any thread. */
	unsigned long long r = eachobs_seed(c->seed, c->epoch, idx);

	for (size_t t = 0; t < len; t++)
		tokens[t] = (uint16_t)((idx + t + (r & 0xff)) % 30000);
	return eachobs_set_length(len * sizeof(uint16_t));
}

/* Ctrl-C: the handler interrupts the iterator of the running epoch, whose
 * loop may be asleep waiting for a batch. The loop clears `running` before
 * it closes the iterator, so the handler never sees a closed one. */
static eachobs_iter *_Atomic running;

static void on_sigint(int sig)
{
	(void)sig;
	eachobs_iter *it = atomic_load(&running);
	if (it)
		eachobs_interrupt(it); /* async-signal-safe */
}

/* One epoch of training: returns the tokens seen, or -1. */
static long train_epoch(eachobs_pool *pool, struct corpus *c,
			unsigned long long epoch)
{
	c->epoch = epoch;
	eachobs_dataset data = { c, corpus_numobs, corpus_getobs,
				 MAX_TOKENS * sizeof(uint16_t) };
	eachobs_options o = { .pool = pool, .batchsize = 32, .drop_last = true,
			      .shuffle = true, .seed = c->seed, .epoch = epoch };
	eachobs_iter *it;
	eachobs_batch b;
	long tokens = 0;
	int rc = eachobs_parallel(&it, &data, &o);

	if (rc < 0) {
		fprintf(stderr, "start: %s\n", eachobs_strerror(rc));
		return -1;
	}
	atomic_store(&running, it);
	while ((rc = eachobs_next_batch(it, &b)) == 1) {
		/* b.count sequences, MAX_TOKENS slots apart, in place. */
		for (size_t j = 0; j < b.count; j++)
			tokens += (long)(b.lengths[j] / sizeof(uint16_t));
	}
	atomic_store(&running, NULL);
	eachobs_close(it); /* prompt: no new getobs starts */
	if (rc == -EINTR) {
		fprintf(stderr, "interrupted in epoch %llu\n", epoch);
		return -1;
	}
	if (rc < 0) {
		fprintf(stderr, "epoch %llu: %s\n", epoch, eachobs_strerror(rc));
		return -1;
	}
	return tokens;
}

/* Validation keeps the previous batch while it reads the next one. */
static int validate(eachobs_pool *pool, struct corpus *c)
{
	eachobs_dataset data = { c, corpus_numobs, corpus_getobs,
				 MAX_TOKENS * sizeof(uint16_t) };
	eachobs_options o = { .pool = pool, .batchsize = 50, .hold = 2,
			      .ordered = true };
	eachobs_iter *it;
	eachobs_batch prev = { 0 }, cur;
	size_t seen = 0;
	int rc = eachobs_parallel(&it, &data, &o);

	if (rc < 0)
		return rc;
	while ((rc = eachobs_next_batch(it, &cur)) == 1) {
		if (prev.data && prev.idx[prev.count - 1] + 1 != cur.idx[0])
			rc = -1; /* ordered: batches follow each other */
		if (prev.data)
			eachobs_release(it, prev.data);
		if (rc < 0)
			break;
		prev = cur;
		seen += cur.count;
	}
	eachobs_close(it);
	return rc == 0 && seen == c->n ? 0 : -1;
}

int main(int argc, char **argv)
{
	if (argc > 1) { /* no arguments but --help */
		int help = strcmp(argv[1], "--help") == 0 ||
			   strcmp(argv[1], "-h") == 0;

		fprintf(help ? stdout : stderr, "usage: %s [--help]\n",
			argv[0]);
		if (help)
			puts("3 shuffled epochs on one pool, then validation.");
		return help ? 0 : 2;
	}

	struct corpus c = { .n = 10000, .seed = 2024 };
	eachobs_pool *pool;
	long first = 0;
	struct sigaction sa = { .sa_handler = on_sigint,
				.sa_flags = SA_RESTART };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);

	if (eachobs_pool_create(&pool, 4) < 0)
		return 1;
	for (unsigned long long epoch = 0; epoch < 3; epoch++) {
		long tokens = train_epoch(pool, &c, epoch);
		if (tokens < 0)
			return 1;
		printf("epoch %llu: %ld tokens\n", epoch, tokens);
		if (epoch == 0)
			first = tokens;
	}
	if (validate(pool, &c) < 0) {
		fprintf(stderr, "validation failed\n");
		return 1;
	}
	eachobs_pool_destroy(pool);
	printf("trained 3 epochs of ~%ld tokens, validated %zu sentences\n",
	       first, c.n);
	return 0;
}
