/*
 * Distributed training's data side: the job's launcher starts one process
 * per node or GPU (here, MPI ranks), and each process loads its own shard
 * of the dataset with eachobs. Every rank iterates its shard of a shuffled
 * synthetic dataset, in batches, for 3 epochs: once with the default
 * padding and once with drop_last. After each epoch an MPI_Allreduce of
 * per-index visit counts checks that the shards together visited every
 * index exactly as promised, that every rank ran the same number of steps,
 * and that the order changed since the previous epoch. Run it with
 * `mpirun -np 4 ./example_mpi_shards [seed]`; it exits 0 when every check
 * holds, and calls MPI_Abort otherwise. It reads its arguments before
 * MPI_Init (Open MPI and MPICH pass them unchanged), so that --help works
 * without mpirun.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */

#include <eachobs.h>
#include <mpi.h>

#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOBS 10007 /* a prime: no rank count divides it */
#define BATCHSIZE 64
#define EPOCHS 3
#define FEATURES 15

/* One observation: its index, to check what arrives, and 15 features. */
struct sample {
	uint64_t idx;
	float x[FEATURES];
};

struct synthetic {
	size_t n;
	unsigned long long seed, epoch; /* what this pass augments with */
};

static size_t synthetic_numobs(void *ctx)
{
	return ((struct synthetic *)ctx)->n;
}

static int synthetic_getobs(void *ctx, size_t idx, void *obs)
{
	const struct synthetic *d = ctx;
	struct sample *s = obs;
	/* Noise from (seed, epoch, idx) only: the same on any rank, any
	 * number of ranks and any number of threads. */
	unsigned long long r = eachobs_seed(d->seed, d->epoch, idx);

	s->idx = idx;
	for (int k = 0; k < FEATURES; k++)
		s->x[k] = (float)(idx % 256) + (float)((r >> (4 * k)) & 15) / 16;
	return 0;
}

/* What one rank saw in one epoch. */
struct pass {
	int *count;             /* visits per dataset index */
	unsigned long long fp;  /* a fingerprint of the shard's order */
	long steps;             /* batches */
};

/* One epoch of this rank's shard; 0, or -1 after saying why. */
static int train_epoch(eachobs_pool *pool, struct synthetic *d, int rank,
		       int nranks, bool drop_last, unsigned long long epoch,
		       struct pass *p)
{
	d->epoch = epoch;
	eachobs_dataset data = { d, synthetic_numobs, synthetic_getobs,
				 sizeof(struct sample) };
	eachobs_options o = { .pool = pool, .batchsize = BATCHSIZE,
			      .shuffle = true, .seed = d->seed, .epoch = epoch,
			      .shard_index = (unsigned)rank,
			      .shard_count = (unsigned)nranks,
			      .drop_last = drop_last };
	eachobs_iter *it;
	eachobs_batch b;
	int rc = eachobs_parallel(&it, &data, &o);

	if (rc < 0) {
		fprintf(stderr, "rank %d: start: %s\n", rank,
			eachobs_strerror(rc));
		return -1;
	}
	while ((rc = eachobs_next_batch(it, &b)) == 1) {
		const struct sample *s = b.data;
		unsigned long long h = 0;

		for (size_t j = 0; j < b.count; j++) {
			if (s[j].idx != b.idx[j])
				rc = -EBADMSG;
			p->count[b.idx[j]]++;
			h = eachobs_seed(h, j, b.idx[j]);
		}
		/* Batches come as they complete, so add up what each holds:
		 * the sum depends on the order, not on the arrival. */
		p->fp += h;
		p->steps++;
		if (rc < 0)
			break;
	}
	eachobs_close(it);
	if (rc < 0) {
		fprintf(stderr, "rank %d, epoch %llu: %s\n", rank, epoch,
			eachobs_strerror(rc));
		return -1;
	}
	return 0;
}

/*
 * What the shards promise together, for nranks <= n. Padded, every shard
 * has ceil(n / R) positions, and the R * ceil(n / R) - n extra ones repeat
 * the start of the shuffled order: those indices are visited twice, every
 * other once. With drop_last the order is cut to R * floor(n / R)
 * positions, no index is visited twice, and each shard's short last batch
 * is dropped too. Returns NULL, or what is broken.
 */
static const char *check(const int *total, size_t n, long nranks,
			 bool drop_last, long min_steps, long max_steps,
			 long *visits, long *twice)
{
	long per_rank = drop_last ? (long)n / nranks
				  : ((long)n + nranks - 1) / nranks;
	long steps = drop_last ? per_rank / BATCHSIZE
			       : (per_rank + BATCHSIZE - 1) / BATCHSIZE;
	long want_visits = nranks * (drop_last ? steps * BATCHSIZE : per_rank);
	long want_twice = drop_last ? 0 : want_visits - (long)n;

	*visits = 0;
	*twice = 0;
	for (size_t i = 0; i < n; i++) {
		if (total[i] < (drop_last ? 0 : 1) || total[i] > 2)
			return "an index was visited too often or never";
		*visits += total[i];
		*twice += total[i] == 2;
	}
	if (*visits != want_visits)
		return "the shards do not add up to the expected visits";
	if (*twice != want_twice)
		return "the wrong number of indices was visited twice";
	if (min_steps != steps || max_steps != steps)
		return "the ranks ran different numbers of steps";
	return NULL;
}

/* The one argument, the seed: a whole number (0x for hex). */
static bool is_seed(const char *s)
{
	char *end;

	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	strtoull(s, &end, 0);
	return errno == 0 && *end == '\0';
}

static void fail(int rank, const char *what)
{
	fprintf(stderr, "rank %d: %s\n", rank, what);
	MPI_Abort(MPI_COMM_WORLD, 1);
}

int main(int argc, char **argv)
{
	int provided, rank, nranks, local_ranks;

	/* Before MPI_Init, so that --help needs no mpirun. */
	if (argc > 2 || (argc == 2 && !is_seed(argv[1]))) {
		bool help = argc == 2 && (strcmp(argv[1], "--help") == 0 ||
					  strcmp(argv[1], "-h") == 0);

		fprintf(help ? stdout : stderr,
			"usage: mpirun -np N %s [SEED]\n", argv[0]);
		if (help)
			puts("Each rank loads its shard for 3 epochs; the "
			     "shards are checked\nto add up. SEED (default "
			     "2024) is the shuffle's.");
		return help ? 0 : 2;
	}
	/* eachobs's threads never call MPI; only this one does. */
	MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
	if (provided < MPI_THREAD_FUNNELED)
		fail(0, "MPI_THREAD_FUNNELED is not supported");
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);

	/* The ranks on one node may share its cores. Bound to CPUs of their
	 * own (srun, mpirun --bind-to core), each takes the CPUs it may run
	 * on; sharing them (no binding, or a socket for several ranks), they
	 * divide what they share. */
	MPI_Comm node;
	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank,
			    MPI_INFO_NULL, &node);
	MPI_Comm_size(node, &local_ranks);
	cpu_set_t mine, any;
	if (sched_getaffinity(0, sizeof mine, &mine) != 0)
		fail(rank, "cannot read the CPU affinity");
	MPI_Allreduce(&mine, &any, (int)sizeof mine, MPI_BYTE, MPI_BOR, node);
	int own = CPU_COUNT(&mine), owned;
	MPI_Allreduce(&own, &owned, 1, MPI_INT, MPI_SUM, node);
	MPI_Comm_free(&node);
	int shared = CPU_COUNT(&any);
	unsigned nthreads = owned == shared	    ? (unsigned)own
			    : shared > local_ranks ? (unsigned)(shared / local_ranks)
						   : 1;

	/* Every rank must shuffle with the same seed: take rank 0's. */
	struct synthetic d = { .n = NOBS, .seed = 2024 };
	if (argc > 1)
		d.seed = strtoull(argv[1], NULL, 0);
	MPI_Bcast(&d.seed, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);

	eachobs_pool *pool;
	if (eachobs_pool_create(&pool, nthreads) < 0)
		fail(rank, "cannot create the pool");
	int *count = malloc(NOBS * sizeof(int));
	int *total = malloc(NOBS * sizeof(int));
	if (!count || !total)
		fail(rank, "out of memory");

	for (int mode = 0; mode < 2; mode++) {
		bool drop_last = mode == 1;
		unsigned long long prev_fp = 0;

		for (unsigned long long epoch = 0; epoch < EPOCHS; epoch++) {
			struct pass p = { .count = count };
			memset(count, 0, NOBS * sizeof(int));
			if (train_epoch(pool, &d, rank, nranks, drop_last,
					epoch, &p) < 0)
				fail(rank, "epoch failed");

			/* Sum the visits over ranks; compare step counts. */
			MPI_Allreduce(count, total, NOBS, MPI_INT, MPI_SUM,
				      MPI_COMM_WORLD);
			long steps[2] = { p.steps, -p.steps }, extreme[2];
			MPI_Allreduce(steps, extreme, 2, MPI_LONG, MPI_MAX,
				      MPI_COMM_WORLD);
			int changed = epoch == 0 || p.fp != prev_fp, all;
			MPI_Allreduce(&changed, &all, 1, MPI_INT, MPI_LAND,
				      MPI_COMM_WORLD);
			prev_fp = p.fp;

			long visits, twice;
			const char *bad = check(total, NOBS, nranks, drop_last,
						-extreme[1], extreme[0],
						&visits, &twice);
			if (bad)
				fail(rank, bad);
			if (!all)
				fail(rank, "a shard's order did not change");
			if (rank == 0)
				printf("%s epoch %llu: %d ranks x %ld steps, "
				       "%ld visits of %d indices, %ld twice, "
				       "%ld never\n",
				       drop_last ? "drop_last" : "padded",
				       epoch, nranks, extreme[0], visits, NOBS,
				       twice,
				       NOBS - (visits - twice));
		}
	}

	eachobs_pool_destroy(pool);
	free(count);
	free(total);
	MPI_Finalize();
	return 0;
}
