/*
 * A program built against the 0.1.0 header (test/abi/eachobs-0.1.h, a
 * verbatim copy) and linked with the current shared library: what a binary
 * compiled before the options and stats structs grew does when it meets a
 * newer libeachobs.so.0. It must call the exported eachobs_parallel and
 * eachobs_get_stats with structs of the 0.1 size and get the 0.1 meaning.
 *
 * It runs iterations with non-default options (nthreads, ordered,
 * batchsize, shuffle with seed and epoch, hold, shards: the last fields of
 * the 0.1 layout) and with NULL options, checks every index once and the
 * order where it is promised, and reads the stats into a 0.1-sized struct
 * followed by a canary that must stay untouched.
 *
 * A plain main(): it must not depend on anything built against the new
 * header. Exits 1 with a message on the first failure.
 */
#define _GNU_SOURCE
#include "eachobs-0.1.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(cond, ...)                                                    \
	do {                                                                \
		if (!(cond)) {                                              \
			fprintf(stderr, "abi_old_binary: %s:%d: ", __FILE__, \
				__LINE__);                                  \
			fprintf(stderr, __VA_ARGS__);                       \
			fputc('\n', stderr);                                \
			exit(1);                                            \
		}                                                           \
	} while (0)

enum { N = 1000, BATCH = 7, SHARDS = 3 };

struct ds {
	size_t n;
	atomic_uint calls[N];
};

static size_t numobs(void *ctx)
{
	return ((struct ds *)ctx)->n;
}

static int getobs(void *ctx, size_t idx, void *obs)
{
	struct ds *d = ctx;

	if (idx >= d->n)
		return -1000; /* reported by eachobs_next, and checked */
	atomic_fetch_add(&d->calls[idx], 1);
	memcpy(obs, &idx, sizeof(idx));
	return 0;
}

static eachobs_dataset dataset(struct ds *d, size_t n)
{
	d->n = n;
	for (size_t i = 0; i < N; i++)
		atomic_init(&d->calls[i], 0);
	return (eachobs_dataset){ d, numobs, getobs, sizeof(size_t) };
}

/* Observations one at a time: the yielded indices into out[], each
 * checked against what getobs wrote. Returns how many. */
static size_t drain(eachobs_iter *it, size_t *out, size_t max)
{
	const void *obs;
	size_t idx, got = 0;
	int rc;

	while ((rc = eachobs_next(it, &obs, &idx)) == 1) {
		CHECK(got < max, "more than %zu observations", max);
		CHECK(memcmp(obs, &idx, sizeof(idx)) == 0,
		      "observation %zu holds the wrong bytes", idx);
		out[got++] = idx;
	}
	CHECK(rc == 0, "eachobs_next: %d (%s)", rc, eachobs_strerror(rc));
	return got;
}

/* Batches with up to `hold` of them held: each is released once `hold`
 * are out, after checking that its bytes did not change meanwhile. */
static size_t drain_batches(eachobs_iter *it, unsigned hold, size_t *out,
			    size_t max)
{
	eachobs_batch held[4], b;
	unsigned nheld = 0;
	size_t got = 0;
	int rc;

	CHECK(hold >= 1 && hold <= 4, "hold %u", hold);
	while ((rc = eachobs_next_batch(it, &b)) == 1) {
		CHECK(b.count >= 1 && b.count <= BATCH, "batch of %zu", b.count);
		for (size_t e = 0; e < b.count; e++) {
			const size_t *slot = (const size_t *)b.data + e;
			CHECK(got < max, "more than %zu observations", max);
			CHECK(*slot == b.idx[e], "batch entry %zu holds %zu, "
			      "not its index %zu", e, *slot, b.idx[e]);
			out[got++] = b.idx[e];
		}
		held[nheld++] = b;
		if (nheld == hold) {
			for (size_t e = 0; e < held[0].count; e++)
				CHECK(((const size_t *)held[0].data)[e] ==
					      held[0].idx[e],
				      "a held batch changed");
			rc = eachobs_release(it, held[0].data);
			CHECK(rc == 0, "eachobs_release: %d", rc);
			memmove(held, held + 1, --nheld * sizeof(held[0]));
		}
	}
	CHECK(rc == 0, "eachobs_next_batch: %d (%s)", rc, eachobs_strerror(rc));
	return got;
}

static void check_once(const struct ds *d, size_t len, const char *what)
{
	CHECK(len == d->n, "%s: %zu observations, n = %zu", what, len, d->n);
	for (size_t i = 0; i < d->n; i++)
		CHECK(atomic_load(&d->calls[i]) == 1, "%s: index %zu loaded "
		      "%u times", what, i, atomic_load(&d->calls[i]));
}

/* The stats of a 0.1 binary, with bytes after them that the library must
 * not write. */
struct stats_and_canary {
	eachobs_stats st;
	unsigned char canary[64];
};

/* NULL options: every default, every index once. */
static void run_defaults(void)
{
	static struct ds d;
	static size_t seq[N];
	eachobs_dataset data = dataset(&d, N);
	eachobs_iter *it;
	int rc = eachobs_parallel(&it, &data, NULL);

	CHECK(rc == 0, "eachobs_parallel(NULL options): %d (%s)", rc,
	      eachobs_strerror(rc));
	check_once(&d, drain(it, seq, N), "NULL options");
	eachobs_close(it);
}

/* Threads, ordered, shuffled batches held two at a time: the same
 * sequence as SERIAL with the same sampler, every index once, and stats
 * that add up, written into exactly the 0.1 struct. */
static void run_options(void)
{
	static struct ds d;
	static size_t want[N], seq[N];
	eachobs_options o = { .nthreads = 3, .ordered = true,
			      .executor = EACHOBS_BACKGROUND,
			      .buffersize = 4, .batchsize = BATCH, .hold = 2,
			      .shuffle = true, .seed = 0x5eed, .epoch = 3 };
	eachobs_options serial = o;
	eachobs_dataset data = dataset(&d, N);
	struct stats_and_canary sc;
	eachobs_iter *it;
	size_t len;
	int rc;

	serial.executor = EACHOBS_SERIAL;
	rc = eachobs_parallel(&it, &data, &serial);
	CHECK(rc == 0, "eachobs_parallel(SERIAL): %d (%s)", rc,
	      eachobs_strerror(rc));
	check_once(&d, drain_batches(it, 2, want, N), "SERIAL");
	eachobs_close(it);
	/* A shuffle that was ignored would yield 0, 1, 2, ... */
	len = 0;
	for (size_t i = 0; i < N; i++)
		len += want[i] == i;
	CHECK(len < N / 10, "shuffle ignored: %zu of %d in place", len, N);

	data = dataset(&d, N);
	rc = eachobs_parallel(&it, &data, &o);
	CHECK(rc == 0, "eachobs_parallel(options): %d (%s)", rc,
	      eachobs_strerror(rc));
	len = drain_batches(it, 2, seq, N);
	check_once(&d, len, "options");
	for (size_t i = 0; i < N; i++)
		CHECK(seq[i] == want[i], "ordered: position %zu yields %zu, "
		      "SERIAL yielded %zu", i, seq[i], want[i]);

	memset(&sc, 0xa5, sizeof(sc));
	rc = eachobs_get_stats(it, &sc.st);
	CHECK(rc == 0, "eachobs_get_stats: %d", rc);
	for (size_t i = 0; i < sizeof(sc.canary); i++)
		CHECK(sc.canary[i] == 0xa5, "eachobs_get_stats wrote byte %zu "
		      "past the 0.1 stats (%zu bytes)", i, sizeof(sc.st));
	CHECK(sc.st.yielded == N, "stats: yielded %llu", sc.st.yielded);
	CHECK(sc.st.batches == (N + BATCH - 1) / BATCH, "stats: batches %llu",
	      sc.st.batches);
	CHECK(sc.st.loaded == N, "stats: loaded %llu", sc.st.loaded);
	CHECK(sc.st.loaded_by_consumer == 0, "stats: BACKGROUND, yet the "
	      "consumer loaded %llu", sc.st.loaded_by_consumer);
	CHECK(sc.st.skipped == 0, "stats: skipped %llu", sc.st.skipped);
	CHECK(sc.st.nworkers >= 1 && sc.st.nworkers <= 3, "stats: nworkers %u",
	      sc.st.nworkers);
	CHECK(sc.st.max_waiting <= 4 + 3, "stats: max_waiting %zu",
	      sc.st.max_waiting);
	eachobs_close(it);
}

/* Ordered shards: shard_index and shard_count end the 0.1 layout, so a
 * library that read a shorter struct would yield every index. */
static void run_shards(void)
{
	static struct ds d;
	static size_t seq[N];
	const size_t n = N - N % SHARDS;
	eachobs_options o = { .nthreads = 2, .ordered = true,
			      .shard_count = SHARDS, .shard_index = 1 };
	eachobs_dataset data = dataset(&d, n);
	eachobs_iter *it;
	size_t len;
	int rc = eachobs_parallel(&it, &data, &o);

	CHECK(rc == 0, "eachobs_parallel(shards): %d (%s)", rc,
	      eachobs_strerror(rc));
	len = drain(it, seq, N);
	CHECK(len == n / SHARDS, "shards: %zu observations, want %zu", len,
	      n / SHARDS);
	for (size_t k = 0; k < len; k++)
		CHECK(seq[k] == 1 + k * SHARDS, "shards: position %zu yields "
		      "%zu, want %zu", k, seq[k], 1 + k * SHARDS);
	eachobs_close(it);
}

static void on_alarm(int sig)
{
	static const char msg[] = "abi_old_binary: still running after 60 s "
				  "(a deadlock?)\n";

	(void)sig;
	(void)!write(2, msg, sizeof(msg) - 1);
	_exit(1);
}

int main(void)
{
	signal(SIGALRM, on_alarm);
	alarm(60);
	run_defaults();
	run_options();
	run_shards();
	printf("abi_old_binary: a program built against the 0.1.0 header "
	       "works with this library (options %zu bytes, stats %zu)\n",
	       sizeof(eachobs_options), sizeof(eachobs_stats));
	return 0;
}
