/*
 * The set of workers (src/workers.c) when a pool lends some or all of
 * them: a lent worker runs its job as soon as the start opens the gate,
 * and an autotuned job may grow the set from there at once, before
 * eachobs__workers_start has returned. Whatever eachobs__workers_grow
 * reads of the set must have been written before the gate opened, and
 * every worker must run its job exactly once, whoever grew the set. A
 * plain main(), so that it also runs under ThreadSanitizer, which
 * reports a field of the set written after the gate opened and read by a
 * worker.
 *
 * Each round: a pool of POOL threads lends to a set of POOL workers (all
 * lent) or POOL + 1 (one created at the start), or of POOL + 2 with one
 * created at the start and one left for grow; worker 0's job grows the
 * set to all its workers first thing.
 *
 * usage: stress_workers [ROUNDS]   (default 300)
 */
#define _GNU_SOURCE
#include "eachobs.h"
#include "workers.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define POOL 2u
#define MAX_WORKERS (POOL + 2)

struct round {
	struct eachobs__workers ws;
	unsigned nworkers;
	_Atomic bool closed;
	_Atomic unsigned runs[MAX_WORKERS];
	_Atomic unsigned grown; /* what worker 0's grow returned */
};

static void job(void *arg, unsigned self)
{
	struct round *r = arg;

	if (self == 0)
		atomic_store(&r->grown,
			     eachobs__workers_grow(&r->ws, r->nworkers));
	atomic_fetch_add(&r->runs[self], 1);
}

static _Noreturn void fail(unsigned round, const char *what, unsigned j,
			   unsigned v)
{
	fprintf(stderr, "stress_workers: FAIL (round %u): %s (worker %u: %u)\n",
		round, what, j, v);
	exit(1);
}

static void one_round(eachobs_pool *pool, unsigned round)
{
	/* All lent; one created at the start; one more left for grow. */
	static const unsigned shapes[][2] = { { POOL, 0 },
					      { POOL + 1, 0 },
					      { POOL + 2, POOL + 1 } };
	const unsigned *shape = shapes[round % 3];
	struct round *r = calloc(1, sizeof(*r));
	struct eachobs__job jb;

	if (!r)
		fail(round, "out of memory", 0, 0);
	r->nworkers = shape[0];
	jb = (struct eachobs__job){ .fn = job,
				    .arg = r,
				    .closed = &r->closed,
				    .stack_size = EACHOBS_DEFAULT_STACK_SIZE };
	eachobs__workers_setup(&r->ws, pool);
	if (eachobs__workers_init(&r->ws, r->nworkers, &jb) < 0)
		fail(round, "eachobs__workers_init", 0, 0);
	r->ws.nstart = shape[1];
	int rc = eachobs__workers_start(&r->ws);
	if (rc < 0)
		fail(round, "eachobs__workers_start", 0, (unsigned)-rc);
	/* Join seals the set: a grow after it creates nothing more. */
	while (atomic_load(&r->grown) == 0)
		nanosleep(&(struct timespec){ 0, 100000 }, NULL);
	eachobs__workers_join(&r->ws);
	for (unsigned j = 0; j < r->nworkers; j++)
		if (atomic_load(&r->runs[j]) != 1)
			fail(round, "runs of a worker's job", j,
			     atomic_load(&r->runs[j]));
	if (atomic_load(&r->grown) != r->nworkers)
		fail(round, "workers with a thread after grow", 0,
		     atomic_load(&r->grown));
	eachobs__workers_fini(&r->ws);
	free(r);
}

int main(int argc, char **argv)
{
	unsigned long rounds = 300;
	eachobs_pool *pool;

	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf("usage: stress_workers [ROUNDS]\n\n"
		       "Sets of workers lent by a pool of %u threads, grown by "
		       "a worker as\nsoon as it runs: every worker's job runs "
		       "once (default 300 rounds).\n",
		       POOL);
		return 0;
	}
	if (argc > 1) {
		char *end;
		rounds = strtoul(argv[1], &end, 10);
		if (*argv[1] == '\0' || *end != '\0' || rounds == 0 ||
		    rounds > 1000000) {
			fprintf(stderr, "stress_workers: '%s' is not a count "
				"of rounds in 1..1000000 (try --help)\n",
				argv[1]);
			return 2;
		}
	}
	if (eachobs_pool_create(&pool, POOL) < 0) {
		fprintf(stderr, "stress_workers: %s\n", eachobs_last_error());
		return 1;
	}
	for (unsigned r = 0; r < rounds; r++)
		one_round(pool, r);
	eachobs_pool_destroy(pool);
	printf("stress_workers: %lu rounds: ok\n", rounds);
	return 0;
}
