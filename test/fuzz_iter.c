/*
 * libFuzzer harness: the fuzzer's bytes choose the options and a dataset's
 * behaviour, and every promise of include/eachobs.h that can be checked from
 * outside is checked for that input:
 *
 *   - eachobs_parallel returns -EINVAL exactly for the invalid arguments the
 *     header lists (out-of-range executor, on_error, nthreads, worker_nice,
 *     stack_size, worker CPUs, batchsize, hold, slot count, an indices entry
 *     >= n, NULL indices with a count, shard_index >= shard_count > 1), 0
 *     otherwise (-EAGAIN only for a worker CPU the system cannot use; with
 *     a pool, 0 or -EAGAIN), and leaves *it NULL on failure;
 *   - the order: with indices, shuffle (seed, epoch) or shards, a SERIAL run
 *     with the same options defines it; it must match the indices and the
 *     shard dealing (ceil(L / count) positions, padded by wrapping around,
 *     floor with drop_last) when nothing is shuffled, and put back together
 *     from every shard, a permutation of the order when shuffled;
 *   - every position is yielded exactly once (each batch as one item), and
 *     all of them when nothing fails and nothing closes early; in the
 *     SERIAL order when ordered or SERIAL;
 *   - batches (batchsize 1..100, drop_last): eachobs_next_batch only, and
 *     eachobs_next gives -EINVAL (and the other way round unbatched); each
 *     batch is positions [k * batchsize, (k + 1) * batchsize) of the order,
 *     failed ones left out under SKIP, at most batchsize, 64-byte aligned;
 *   - each observation holds the bytes getobs wrote and the length it set
 *     with eachobs_set_length (eachobs_batch.lengths, eachobs_obs_length),
 *     unchanged while valid: until the next call, or with hold (0..4) until
 *     released in an order the input chooses; -ENOBUFS exactly when hold
 *     items are held and more remain, not sticky; releasing a stranger, an
 *     item twice, or with hold 0 gives -EINVAL;
 *   - getobs runs at most once per position of its index, never for a
 *     batch drop_last drops, never after close; obs is aligned (64 bytes,
 *     in a batch as obs_size allows); no more than (buffersize + nthreads +
 *     max(1, hold)) * batchsize distinct addresses reach getobs
 *     (max(1, hold) * batchsize for SERIAL);
 *   - a failing getobs is reported with its code (-ERANGE for a positive
 *     one, -ERESTART for -EINTR) and index, ordered after every earlier position (batch), and
 *     sticks; under SKIP it is counted and kept by eachobs_failures instead;
 *   - close joins every thread it created and gives borrowed ones back to
 *     the pool (sometimes 1..4 threads), which joins them when destroyed;
 *   - nothing leaks (LeakSanitizer, run by libFuzzer after each input).
 *
 * Build and run with tools/fuzz.sh. A crash leaves the input in the working
 * directory; `fuzz_iter FILE` runs that input again.
 */
#define _GNU_SOURCE
/* tools/fuzz.sh compiles the library and this harness in one command, all
 * with EACHOBS_BUILDING; the harness is a program using the header, so it
 * takes the header's inline eachobs_parallel, not the library's 0.1 one. */
#undef EACHOBS_BUILDING
#include "eachobs.h"
#include "buffer_rule.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_N 3000
#define MAX_FAILS 4
#define MAX_IDX 16            /* entries of an indices list */
#define MAX_POS (MAX_N + 8)   /* positions of one pass, padding included */
#define MAX_BATCH 100
#define MAX_POOL 4

/* The fuzzer's bytes, read front to back; zeros once they run out. */
struct bytes {
	const uint8_t *p;
	size_t len;
};

static unsigned take(struct bytes *b)
{
	if (!b->len)
		return 0;
	b->len--;
	return *b->p++;
}

static unsigned take16(struct bytes *b)
{
	return take(b) | take(b) << 8;
}

/* What the input asks for. */
struct plan {
	eachobs_options o;
	unsigned cpus[2];
	size_t idxs[MAX_IDX]; /* o.indices, when the input gives a list */
	size_t n, obs_size, close_after;
	size_t fail_idx[MAX_FAILS];
	int fail_code[MAX_FAILS];
	unsigned nfail;
	size_t fail_every, fail_rest; /* also fail idx % every == rest */
	int every_code;
	unsigned yield_mod; /* getobs yields the CPU when idx % yield_mod == 0 */
	int null_arg;       /* 1..4: pass a NULL it, data, numobs or getobs */
	int null_opts;
	bool varlen;        /* getobs calls eachobs_set_length(len_of(idx)) */
	unsigned pool_n;    /* 0: no pool; else a pool of this many threads */
};

struct ds {
	const struct plan *p;
	atomic_uchar calls[MAX_N];
	/* Positions of idx in this pass: getobs may run that often, no more
	 * (0 for every index when the start must fail). */
	unsigned short mult[MAX_N];
	size_t align; /* what obs must be aligned to */
	atomic_int closed;
	pthread_mutex_t lock; /* guards slots */
	const void *slots[4096];
	size_t nslots;
	int slot_overflow;
};

#define CHECK(cond, ...)                                                   \
	do {                                                               \
		if (!(cond)) {                                             \
			fprintf(stderr, "fuzz_iter: %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                      \
			fprintf(stderr, "\n");                             \
			abort();                                           \
		}                                                          \
	} while (0)

static unsigned char pattern(size_t idx, size_t byte)
{
	return (unsigned char)(idx * 131 + byte * 7 + 1);
}

/* The bytes getobs writes for idx: obs_size unless lengths vary. */
static size_t len_of(const struct plan *p, size_t idx)
{
	return p->varlen ? (idx * 7 + 3) % (p->obs_size + 1) : p->obs_size;
}

/* The code getobs returns for idx; 0 when it succeeds. */
static int code_of(const struct plan *p, size_t idx)
{
	for (unsigned i = 0; i < p->nfail; i++)
		if (p->fail_idx[i] == idx)
			return p->fail_code[i];
	if (p->fail_every && idx % p->fail_every == p->fail_rest)
		return p->every_code;
	return 0;
}

/* The code eachobs reports for a getobs result. */
static int reported(int code)
{
	return code > 0 ? -ERANGE : code == -EINTR ? -ERESTART : code;
}

static size_t numobs(void *ctx)
{
	return ((struct ds *)ctx)->p->n;
}

static void note_slot(struct ds *d, const void *obs)
{
	pthread_mutex_lock(&d->lock);
	size_t i = 0;
	while (i < d->nslots && d->slots[i] != obs)
		i++;
	if (i == d->nslots) {
		if (d->nslots < sizeof(d->slots) / sizeof(d->slots[0]))
			d->slots[d->nslots++] = obs;
		else
			d->slot_overflow = 1;
	}
	pthread_mutex_unlock(&d->lock);
}

static int getobs(void *ctx, size_t idx, void *obs)
{
	struct ds *d = ctx;
	const struct plan *p = d->p;
	size_t len = len_of(p, idx);

	CHECK(!atomic_load(&d->closed), "getobs(%zu) after close", idx);
	CHECK(idx < p->n, "getobs(%zu) with n = %zu", idx, p->n);
	CHECK(atomic_fetch_add(&d->calls[idx], 1) < d->mult[idx],
	      "getobs(%zu) more often than its %u positions", idx, d->mult[idx]);
	CHECK(obs && (uintptr_t)obs % d->align == 0,
	      "obs %p not %zu-byte aligned", obs, d->align);
	note_slot(d, obs);
	if (p->yield_mod && idx % p->yield_mod == 0)
		sched_yield();
	if (p->varlen) {
		CHECK(eachobs_set_length(p->obs_size + 1) == -EINVAL,
		      "set_length above obs_size");
		CHECK(eachobs_set_length(p->obs_size) == 0, "set_length(obs_size)");
		CHECK(eachobs_set_length(len) == 0, "set_length(%zu)", len);
	}
	for (size_t b = 0; b < len; b++)
		((unsigned char *)obs)[b] = pattern(idx, b);
	return code_of(p, idx);
}

static void check_bytes(const struct plan *p, const void *obs, size_t idx)
{
	const unsigned char *c = obs;

	for (size_t b = 0; b < len_of(p, idx); b++)
		CHECK(c[b] == pattern(idx, b), "slot of %zu byte %zu changed", idx, b);
}

static int threads_now(void)
{
	DIR *dir = opendir("/proc/self/task");
	struct dirent *e;
	int k = 0;

	if (!dir)
		return -1;
	while ((e = readdir(dir)) != NULL)
		k += e->d_name[0] != '.';
	closedir(dir);
	return k;
}

/* src/cpus.c, compiled into the harness with the library. */
unsigned eachobs__default_threads(void);

/* nthreads with 0 resolved: the pool's size, else the CPUs this process
 * may use (src/cpus.c: its affinity, a cgroup quota). */
static size_t resolved(const struct plan *p, unsigned nthreads)
{
	return nthreads	     ? nthreads
	       : p->pool_n ? p->pool_n
			   : eachobs__default_threads();
}

/*
 * The thread count, once it is down to want or after a second: a joined
 * thread can stay listed in /proc for a moment after pthread_join returns.
 */
static int threads_settle(int want)
{
	struct timespec pause = { 0, 1000000 };
	int k;

	for (int i = 0; (k = threads_now()) > want && i < 1000; i++)
		nanosleep(&pause, NULL);
	return k;
}

static void decode(struct bytes *b, struct plan *p)
{
	/* PTHREAD_STACK_MIN is a sysconf call with _GNU_SOURCE. */
	const size_t stacks[] = { 0, 1, (size_t)PTHREAD_STACK_MIN - 1,
				  (size_t)PTHREAD_STACK_MIN, 64 << 10, 256 << 10 };
	static const int nices[] = { 0, 1, 19, -1, 20, INT_MIN };
	unsigned v;

	memset(p, 0, sizeof(*p));
	v = take(b);
	p->o.nthreads = v == 255 ? EACHOBS_MAX_THREADS + 1 : v % 17;
	v = take(b);
	/* Too many slots: -EINVAL (a valid count that large would take
	 * gigabytes; the unit tests cover the exact boundary). */
	p->o.buffersize = v == 255   ? (size_t)EACHOBS_MAX_SLOTS + 1
			  : v == 254 ? SIZE_MAX
			  : v == 253 ? (size_t)EACHOBS_MAX_SLOTS - 1
				     : v % 70;
	v = take(b);
	p->o.basesize = v == 255 ? SIZE_MAX : v % 40;
	v = take(b);
	p->o.oversubscription = v == 255 ? UINT_MAX : v % 20;
	v = take(b);
	p->o.executor = v == 255 ? (eachobs_executor)-1 : (eachobs_executor)(v % 5);
	p->o.ordered = take(b) & 1;
	v = take(b);
	p->o.on_error = (eachobs_on_error)(v % 3);
	p->o.stack_size = stacks[take(b) % 6];
	p->o.worker_nice = nices[take(b) % 6];
	switch (take(b) % 8) {
	case 1: /* a CPU that exists */
		p->cpus[0] = 0;
		p->o.worker_cpus = p->cpus;
		p->o.nworker_cpus = 1;
		break;
	case 2: /* a valid number the system cannot use: -EAGAIN at start */
		p->cpus[0] = EACHOBS_MAX_CPU - 1;
		p->o.worker_cpus = p->cpus;
		p->o.nworker_cpus = 1;
		break;
	case 3: /* out of range: -EINVAL */
		p->cpus[0] = 0;
		p->cpus[1] = EACHOBS_MAX_CPU;
		p->o.worker_cpus = p->cpus;
		p->o.nworker_cpus = 2;
		break;
	case 4: /* NULL with a count: -EINVAL */
		p->o.nworker_cpus = 1;
		break;
	}
	v = take16(b);
	p->n = v % 8 == 0 ? v % (MAX_N + 1) : v % 65; /* mostly small */
	p->obs_size = take(b) % 4 ? take(b) % 65 : take(b) + 1; /* 0..256 */
	/* The newer options: read early, so that short inputs reach them
	 * too (a zero byte, as past the input's end, means the option's
	 * default). */
	v = take(b);
	p->o.batchsize = v == 255 ? EACHOBS_MAX_BATCHSIZE + 1
			 : v & 1  ? (v >> 1) % MAX_BATCH + 1
				  : 0;
	p->o.drop_last = take(b) & 1;
	v = take(b);
	p->o.hold = v == 255 ? EACHOBS_MAX_SLOTS + 1 : v % 5;
	p->varlen = take(b) & 1;
	v = take(b);
	p->pool_n = v % 3 == 2 ? v / 3 % MAX_POOL + 1 : 0;
	switch (take(b) % 8) {
	case 3: case 4: case 5: /* a list, sometimes with an entry >= n */
		p->o.nindices = take(b) % (MAX_IDX + 1);
		for (size_t i = 0; i < p->o.nindices; i++) {
			v = take(b);
			p->idxs[i] = v == 255 || !p->n ? p->n + v % 2 : v % p->n;
		}
		p->o.indices = p->idxs;
		break;
	case 6: /* NULL with a count: -EINVAL */
		p->o.nindices = 1 + take(b) % 4;
		break;
	}
	p->o.shuffle = take(b) & 1;
	p->o.seed = take16(b);
	p->o.epoch = take(b) % 3;
	v = take(b);
	p->o.shard_count = v % 5;
	p->o.shard_index = v / 5 % (p->o.shard_count + 1); /* = count: -EINVAL */
	v = take(b);
	p->close_after = v < 200 ? SIZE_MAX : (size_t)(v - 200) * p->n / 55;
	p->nfail = take(b) % (MAX_FAILS + 1);
	for (unsigned i = 0; i < p->nfail; i++) {
		p->fail_idx[i] = p->n ? take16(b) % p->n : 0;
		v = take(b);
		p->fail_code[i] = v < 200 ? -(int)(v % 133) - 1 : (int)(v - 199);
		/* getobs codes pass through unchanged, so a getobs returning
		 * -ENOBUFS would read as "hold is full" to this harness (CI's
		 * fuzz run found exactly that); the library cannot tell them
		 * apart either, and the header says codes pass through. */
		if (p->fail_code[i] == -ENOBUFS)
			p->fail_code[i] = -EIO;
	}
	v = take(b);
	if (v >= 200 && p->n) {
		p->fail_every = 1 + v % 7;
		p->fail_rest = take(b) % p->fail_every;
		p->every_code = -EBADMSG;
	}
	p->yield_mod = take(b) % 8;
	v = take(b);
	p->null_arg = v >= 250 ? (int)(v - 249) : 0; /* 1..6; 5, 6: none */
	p->null_opts = take(b) == 255;
	if (p->null_opts)
		p->pool_n = 0; /* no options, no pool */
}

/* Shards in effect: 1 unless shard_count > 1. */
static unsigned shards(const eachobs_options *o)
{
	return o->shard_count > 1 ? o->shard_count : 1;
}

/* L, the length of the order before shuffling and sharding. */
static size_t order_len(const eachobs_options *o, size_t n)
{
	return o->indices ? o->nindices : n;
}

static size_t order_at(const eachobs_options *o, size_t k)
{
	return o->indices ? o->indices[k] : k;
}

/* Positions of one shard: ceil(L / count), or floor with drop_last. */
static size_t shard_len(const eachobs_options *o, size_t n)
{
	size_t L = order_len(o, n), c = shards(o);

	return o->drop_last ? L / c : L / c + (L % c != 0);
}

/* Positions loaded: the shard, cut to whole batches with drop_last. */
static size_t positions(const eachobs_options *o, size_t n)
{
	size_t len = shard_len(o, n);

	if (o->batchsize && o->drop_last)
		len -= len % o->batchsize;
	return len;
}

static bool sampler_valid(const eachobs_options *o, size_t n)
{
	if (!o->indices && o->nindices)
		return false;
	if (o->shard_count > 1 && o->shard_index >= o->shard_count)
		return false;
	for (size_t i = 0; i < o->nindices; i++)
		if (o->indices[i] >= n)
			return false;
	return true;
}

/* The code eachobs_parallel must return for the plan, by the header. */
static int expected_start(const struct plan *p)
{
	const eachobs_options *o = &p->o;
	size_t consumer = o->hold ? o->hold : 1;

	if (p->null_arg >= 1 && p->null_arg <= 4)
		return -EINVAL;
	if (p->null_opts)
		return 0;
	if ((unsigned)o->executor > EACHOBS_SERIAL ||
	    (unsigned)o->on_error > EACHOBS_ON_ERROR_SKIP ||
	    o->nthreads > EACHOBS_MAX_THREADS || o->hold > EACHOBS_MAX_SLOTS ||
	    o->batchsize > EACHOBS_MAX_BATCHSIZE)
		return -EINVAL;
	if (o->executor != EACHOBS_SERIAL) {
		/* SERIAL ignores the sizing and placement options. */
		if (o->stack_size && o->stack_size < (size_t)PTHREAD_STACK_MIN)
			return -EINVAL;
		if (o->worker_nice < 0 || o->worker_nice > 19)
			return -EINVAL;
		if (o->nworker_cpus && !o->worker_cpus)
			return -EINVAL;
		for (unsigned i = 0; i < o->nworker_cpus; i++)
			if (o->worker_cpus[i] >= EACHOBS_MAX_CPU)
				return -EINVAL;
		if (o->buffersize > EACHOBS_MAX_SLOTS ||
		    o->buffersize + resolved(p, o->nthreads) + consumer >
			    EACHOBS_MAX_SLOTS)
			return -EINVAL;
	}
	if (!sampler_valid(o, p->n))
		return -EINVAL;
	if (o->executor != EACHOBS_SERIAL && o->nworker_cpus &&
	    o->worker_cpus[0] == EACHOBS_MAX_CPU - 1 && positions(o, p->n))
		return -EAGAIN; /* on created and borrowed threads alike */
	return 0;
}

/* The options in effect: all-zero when the input passes NULL. */
static eachobs_options effective(const struct plan *p)
{
	return p->null_opts ? (eachobs_options){ 0 } : p->o;
}

/* Distinct obs addresses getobs may see: (buffersize + nthreads +
 * max(1, hold)) units of batchsize observations, with the defaults
 * resolved as the header describes; max(1, hold) units for SERIAL. */
static size_t slot_bound(const struct plan *p)
{
	eachobs_options o = effective(p);
	size_t cap = o.batchsize ? o.batchsize : 1;
	size_t consumer = o.hold ? o.hold : 1;
	size_t t = resolved(p, o.nthreads);
	size_t b = o.buffersize;

	if (o.executor == EACHOBS_SERIAL)
		return consumer * cap;
	if (!b)
		b = rule_default_buffersize(o.batchsize != 0, o.ordered, t,
					    rule_unit_bytes(cap, p->obs_size));
	return (b + t + consumer) * cap;
}

static size_t ref_numobs(void *ctx)
{
	return *(const size_t *)ctx;
}

static int ref_getobs(void *ctx, size_t idx, void *obs)
{
	(void)ctx;
	(void)idx;
	(void)obs;
	return 0;
}

/*
 * The order shard `shard` visits, by definition: what a SERIAL run with the
 * same sampler options yields (batchsize 0, so drop_last acts on shards
 * only). Returns its length.
 */
static size_t serial_order(const struct plan *p, unsigned shard, size_t *out)
{
	size_t n = p->n, k = 0, idx;
	eachobs_dataset ds = { &n, ref_numobs, ref_getobs, 0 };
	eachobs_options o = {
		.executor = EACHOBS_SERIAL,
		.indices = p->o.indices,
		.nindices = p->o.nindices,
		.shuffle = p->o.shuffle,
		.seed = p->o.seed,
		.epoch = p->o.epoch,
		.shard_index = shard,
		.shard_count = p->o.shard_count,
		.drop_last = p->o.drop_last,
	};
	eachobs_iter *it;
	int rc = eachobs_parallel(&it, &ds, &o);

	CHECK(rc == 0, "reference SERIAL run: start returned %d", rc);
	while ((rc = eachobs_next(it, NULL, &idx)) == 1) {
		CHECK(k < MAX_POS, "reference SERIAL run: too many positions");
		out[k++] = idx;
	}
	CHECK(rc == 0, "reference SERIAL run ended with %d", rc);
	eachobs_close(it);
	return k;
}

/*
 * Shuffled: the shards, put back together (shard s at positions s, s + c,
 * ...), must be a permutation of the order padded by wrapping around to
 * its start, or a part of one with drop_last.
 */
static void check_shuffled_shards(const struct plan *p, size_t len)
{
	static size_t whole[MAX_POS + MAX_POOL], part[MAX_POS];
	static unsigned want[MAX_N], have[MAX_N];
	const eachobs_options *o = &p->o;
	size_t L = order_len(o, p->n), c = shards(o), m = len * c;
	size_t head = m < L ? m : L;

	for (unsigned s = 0; s < c; s++) {
		CHECK(serial_order(p, s, part) == len, "shard %u has another length", s);
		for (size_t j = 0; j < len; j++)
			whole[j * c + s] = part[j];
	}
	memset(want, 0, p->n * sizeof(want[0]));
	memset(have, 0, p->n * sizeof(have[0]));
	for (size_t k = 0; k < L; k++)
		want[order_at(o, k)]++;
	for (size_t j = 0; j < head; j++)
		have[whole[j]]++;
	for (size_t i = 0; i < p->n; i++)
		CHECK(have[i] <= want[i] && (head < L || have[i] == want[i]),
		      "shuffled order visits %zu %u times, the order has it %u times",
		      i, have[i], want[i]);
	for (size_t j = L; j < m; j++)
		CHECK(whole[j] == whole[j - L], "padding at %zu does not wrap", j);
}

/*
 * R[0 .. npos): the dataset index at each position of this pass. Computed
 * from the options where no shuffle is involved, and checked against the
 * SERIAL run, which defines the order.
 */
static size_t build_order(const struct plan *p, size_t *R)
{
	const eachobs_options *o = &p->o;
	size_t L = order_len(o, p->n), c = shards(o);
	size_t len = shard_len(o, p->n);

	CHECK(serial_order(p, o->shard_index, R) == len,
	      "SERIAL order length, expected %zu (L %zu, %zu shards)", len, L, c);
	if (o->shuffle && L >= 2) {
		check_shuffled_shards(p, len);
	} else {
		for (size_t j = 0; j < len; j++) {
			size_t q = c > 1 ? (o->shard_index + j * c) % L : j;

			CHECK(R[j] == order_at(o, q), "SERIAL position %zu: %zu, expected %zu",
			      j, R[j], order_at(o, q));
		}
	}
	return positions(o, p->n);
}

/* A yielded observation, or batch; idx and lengths copied when yielded. */
struct item {
	const unsigned char *data;
	const size_t *lib_idx, *lib_len; /* the batch's own arrays */
	size_t count;
	size_t idx[MAX_BATCH];
};

/* What the pass should yield, by position. */
struct expect {
	const struct plan *p;
	const size_t *R;
	size_t npos, cap, nb;
	bool skip, stop_fail;
	size_t first_fail; /* the first batch with a failing position */
	unsigned char used[MAX_POS];
};

static bool fails(const struct expect *e, size_t pos)
{
	return code_of(e->p, e->R[pos]) != 0;
}

static size_t batch_end(const struct expect *e, size_t k)
{
	size_t end = (k + 1) * e->cap;

	return end < e->npos ? end : e->npos;
}

/* Whether batch k is yielded: under SKIP, unless all of it fails; under
 * STOP, unless any of it fails. */
static bool yieldable(const struct expect *e, size_t k)
{
	size_t ok = 0, all = batch_end(e, k) - k * e->cap;

	for (size_t pos = k * e->cap; pos < batch_end(e, k); pos++)
		ok += !fails(e, pos);
	return e->skip ? ok > 0 : ok == all;
}

/* Whether t is batch k with its failed observations left out. */
static bool matches(const struct expect *e, size_t k, const struct item *t)
{
	size_t j = 0;

	for (size_t pos = k * e->cap; pos < batch_end(e, k); pos++) {
		if (fails(e, pos))
			continue;
		if (j == t->count || t->idx[j] != e->R[pos])
			return false;
		j++;
	}
	return j == t->count;
}

/* The bytes, indices and lengths of a yielded item, unchanged while it is
 * valid (every item has its own pointer, even with obs_size 0). */
static void check_item(const struct plan *p, const struct item *t)
{
	for (size_t j = 0; j < t->count; j++) {
		check_bytes(p, t->data + j * p->obs_size, t->idx[j]);
		if (t->lib_idx)
			CHECK(t->lib_idx[j] == t->idx[j] &&
				      t->lib_len[j] == len_of(p, t->idx[j]),
			      "batch entry %zu: index %zu length %zu, expected %zu, %zu", j,
			      t->lib_idx[j], t->lib_len[j], t->idx[j], len_of(p, t->idx[j]));
	}
}

/* eachobs_next or eachobs_next_batch into *t; *err_idx set on a failure. */
static int next_item(eachobs_iter *it, const struct plan *p, size_t batchsize,
		     struct item *t, size_t *err_idx)
{
	size_t cap = batchsize;

	if (batchsize) {
		eachobs_batch bt;
		int rc = eachobs_next_batch(it, &bt);

		if (rc != 1) {
			CHECK(!bt.data && !bt.count && !bt.lengths,
			      "batch not cleared on %d", rc);
			CHECK(rc >= 0 || rc == -ENOBUFS ? !bt.idx : bt.idx != NULL,
			      "batch idx on %d", rc);
			if (rc < 0 && rc != -ENOBUFS)
				*err_idx = *bt.idx;
			return rc;
		}
		CHECK(bt.count >= 1 && bt.count <= cap && bt.data && bt.idx &&
			      bt.lengths && (uintptr_t)bt.data % 64 == 0,
		      "batch of %zu at %p (batchsize %zu)", bt.count, bt.data, cap);
		t->data = bt.data;
		t->lib_idx = bt.idx;
		t->lib_len = bt.lengths;
		t->count = bt.count;
		memcpy(t->idx, bt.idx, bt.count * sizeof(bt.idx[0]));
		for (size_t j = 0; j < bt.count; j++)
			CHECK(bt.idx[j] < p->n, "batch index %zu", bt.idx[j]);
		return 1;
	}
	const void *obs = t; /* anything but NULL */
	size_t idx = SIZE_MAX, len;
	int rc = eachobs_next(it, &obs, &idx);

	if (rc != 1) {
		CHECK(obs == NULL, "obs not NULL on %d", rc);
		if (rc < 0 && rc != -ENOBUFS)
			*err_idx = idx;
		return rc;
	}
	CHECK(obs && (uintptr_t)obs % 64 == 0 && idx < p->n,
	      "index %zu at %p", idx, obs);
	CHECK(eachobs_obs_length(it, obs, &len) == 0 && len == len_of(p, idx),
	      "length of %zu: %zu, expected %zu", idx, len, len_of(p, idx));
	t->data = obs;
	t->lib_idx = t->lib_len = NULL;
	t->count = 1;
	t->idx[0] = idx;
	return 1;
}

/* Give back held[j], after checking it is still intact. */
static void release(eachobs_iter *it, const struct plan *p, struct item *held,
		    size_t *nheld, size_t j, bool again)
{
	const unsigned char *data = held[j].data;
	bool shared = false;

	check_item(p, &held[j]);
	CHECK(eachobs_release(it, data) == 0, "release of a held item");
	held[j] = held[--*nheld];
	for (size_t i = 0; i < *nheld; i++)
		shared |= held[i].data == data; /* obs_size 0: one address */
	if (again && !shared)
		CHECK(eachobs_release(it, data) == -EINVAL, "released twice");
}

static void iterate(struct ds *d, eachobs_iter *it, struct bytes *b,
		    const size_t *R, size_t npos)
{
	const struct plan *p = d->p;
	eachobs_options o = effective(p);
	bool ordered = o.ordered || o.executor == EACHOBS_SERIAL;
	static struct expect e;
	struct item held[5], cur;
	size_t nheld = 0, K = o.hold, count = 0, yielded = 0, nfailed = 0;
	size_t remaining = 0, cursor = 0, err_idx = SIZE_MAX;
	int rc = 1;

	e.p = p;
	e.R = R;
	e.npos = npos;
	e.cap = o.batchsize ? o.batchsize : 1;
	e.nb = npos / e.cap + (npos % e.cap != 0);
	e.skip = o.on_error == EACHOBS_ON_ERROR_SKIP;
	memset(e.used, 0, e.nb);
	for (size_t pos = 0; pos < npos; pos++)
		nfailed += fails(&e, pos);
	e.stop_fail = !e.skip && nfailed;
	e.first_fail = e.nb;
	for (size_t k = 0; k < e.nb; k++) {
		remaining += yieldable(&e, k);
		for (size_t pos = k * e.cap; pos < batch_end(&e, k); pos++)
			if (e.first_fail == e.nb && fails(&e, pos))
				e.first_fail = k;
	}
	if (o.batchsize) {
		const void *obs;
		CHECK(eachobs_next(it, &obs, NULL) == -EINVAL, "next on a batched iterator");
	} else {
		eachobs_batch bt;
		CHECK(eachobs_next_batch(it, &bt) == -EINVAL, "next_batch unbatched");
	}
	CHECK(eachobs_release(it, NULL) == -EINVAL, "release(NULL)");
	while (count < p->close_after) {
		unsigned r = take(b);

		for (size_t j = 0; j < nheld; j++)
			check_item(p, &held[j]);
		if (K && nheld && r % 4)
			release(it, p, held, &nheld, (r / 4) % nheld, r & 0x80);
		if (r == 255 || (!K && nheld && r == 254))
			CHECK(eachobs_release(it, &cur) == -EINVAL, "release of a stranger");
		if (!K && nheld && r == 253)
			CHECK(eachobs_release(it, held[0].data) == -EINVAL,
			      "release with hold 0");
		rc = next_item(it, p, o.batchsize, &cur, &err_idx);
		if (!K)
			nheld = 0; /* the previous item is given up */
		if (rc == -ENOBUFS) {
			CHECK(K && nheld == K, "-ENOBUFS with %zu of %zu held", nheld, K);
			CHECK(remaining || e.stop_fail || e.skip, "-ENOBUFS at the end");
			release(it, p, held, &nheld, take(b) % nheld, false);
			continue;
		}
		if (K && nheld == K && !e.stop_fail)
			CHECK(rc == 0 && !remaining, "%d with %zu held, %zu to come", rc,
			      nheld, remaining);
		if (rc != 1)
			break;
		size_t k = ordered ? cursor : 0;
		if (ordered) {
			while (k < e.nb && !yieldable(&e, k))
				k++;
			CHECK(k < e.nb && matches(&e, k, &cur),
			      "ordered: batch %zu (index %zu) is not the next", count,
			      cur.idx[0]);
			cursor = k + 1;
		} else {
			while (k < e.nb &&
			       (e.used[k] || !yieldable(&e, k) || !matches(&e, k, &cur)))
				k++;
			CHECK(k < e.nb, "item %zu (index %zu, %zu observations) is no "
					"position left to yield", count, cur.idx[0], cur.count);
		}
		CHECK(!e.used[k], "batch %zu twice", k);
		e.used[k] = 1;
		remaining--;
		check_item(p, &cur);
		held[nheld++] = cur;
		yielded += cur.count;
		count++;
	}
	CHECK(eachobs_cancelled() == false, "cancelled outside getobs");
	if (count >= p->close_after || rc == 1)
		return;
	if (!e.stop_fail) {
		eachobs_failure kept[EACHOBS_FAILURES_KEPT];
		eachobs_stats st;
		size_t nk, i = 0;

		CHECK(rc == 0, "ended with %d (%s)", rc, eachobs_strerror(rc));
		CHECK(!remaining, "ended with %zu batches never yielded", remaining);
		CHECK(next_item(it, p, o.batchsize, &cur, &err_idx) == 0, "end is not sticky");
		nk = eachobs_failures(it, kept, EACHOBS_FAILURES_KEPT);
		CHECK(nk == (e.skip ? nfailed : 0), "%zu failures counted, %zu made",
		      nk, nfailed);
		for (size_t pos = 0; pos < npos && i < nk && i < EACHOBS_FAILURES_KEPT;
		     pos++) {
			if (!fails(&e, pos))
				continue;
			CHECK(code_of(p, kept[i].idx) &&
				      kept[i].code == reported(code_of(p, kept[i].idx)),
			      "failure %zu: index %zu code %d", i, kept[i].idx,
			      kept[i].code);
			CHECK(!ordered || kept[i].idx == R[pos],
			      "ordered failure %zu: index %zu, expected %zu", i,
			      kept[i].idx, R[pos]);
			i++;
		}
		CHECK(eachobs_get_stats(it, &st) == 0, "get_stats");
		CHECK(st.yielded == yielded, "stats: %llu yielded, %zu seen",
		      st.yielded, yielded);
		CHECK(!o.batchsize || st.batches == count, "stats: %llu batches, %zu seen",
		      st.batches, count);
		CHECK(st.skipped == (e.skip ? nfailed : 0), "stats: %llu skipped",
		      st.skipped);
	} else {
		size_t again = SIZE_MAX;
		bool known = false;

		CHECK(rc < 0, "eachobs_next returned %d", rc);
		CHECK(err_idx < p->n && code_of(p, err_idx) &&
			      rc == reported(code_of(p, err_idx)),
		      "error %d at index %zu, which returns %d", rc, err_idx,
		      err_idx < p->n ? code_of(p, err_idx) : 0);
		for (size_t pos = 0; pos < npos; pos++)
			known |= R[pos] == err_idx && (!ordered ||
				pos / e.cap == e.first_fail);
		CHECK(known, "error at index %zu, not a failing position%s", err_idx,
		      ordered ? " of the first failing batch" : "");
		CHECK(!ordered || count == e.first_fail,
		      "ordered error after %zu batches, first failing batch %zu", count,
		      e.first_fail);
		CHECK(next_item(it, p, o.batchsize, &cur, &again) == rc && again == err_idx,
		      "error is not sticky");
		CHECK(eachobs_failures(it, NULL, 0) == 0, "STOP counted failures");
	}
	if (o.batchsize) {
		const void *obs;
		CHECK(eachobs_next(it, &obs, NULL) == -EINVAL, "next on a batched iterator");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ds d;
	static size_t R[MAX_POS];
	struct bytes b = { data, size };
	struct plan p;
	eachobs_iter *it = (eachobs_iter *)&d; /* must be set to NULL */
	eachobs_pool *pool = NULL;
	int base = threads_now(), rc;
	size_t npos = 0;

	decode(&b, &p);
	memset(&d, 0, sizeof(d));
	d.p = &p;
	pthread_mutex_init(&d.lock, NULL);
	CHECK(eachobs_set_length(0) == -EINVAL, "set_length outside getobs");
	if (p.pool_n) {
		CHECK(eachobs_pool_create(NULL, 1) == -EINVAL, "pool_create(NULL)");
		CHECK(eachobs_pool_create(&pool, 0) == -EINVAL && !pool,
		      "pool_create with 0 threads");
		rc = eachobs_pool_create(&pool, p.pool_n);
		CHECK(rc == 0 || (rc == -EAGAIN && !pool), "pool_create: %d", rc);
		if (rc < 0) {
			pthread_mutex_destroy(&d.lock);
			return 0;
		}
		p.o.pool = pool;
	}
	eachobs_dataset ds = { &d, numobs, getobs, p.obs_size };
	switch (p.null_arg) {
	case 3: ds.numobs = NULL; break;
	case 4: ds.getobs = NULL; break;
	}
	int want = expected_start(&p);
	if (want >= 0) {
		eachobs_options o = effective(&p);

		if (o.indices || o.nindices || o.shuffle || o.shard_count > 1) {
			npos = build_order(&p, R);
		} else {
			npos = positions(&o, p.n);
			for (size_t pos = 0; pos < npos; pos++)
				R[pos] = pos;
		}
		for (size_t pos = 0; pos < npos; pos++)
			d.mult[R[pos]]++;
		d.align = 64;
		if (o.batchsize && p.obs_size % 64)
			d.align = p.obs_size & -p.obs_size; /* its lowest set bit */
	}
	rc = eachobs_parallel(p.null_arg == 1 ? NULL : &it,
			      p.null_arg == 2 ? NULL : &ds,
			      p.null_opts ? NULL : &p.o);
	CHECK(rc == want,
	      "eachobs_parallel returned %d (%s), expected %d", rc,
	      eachobs_strerror(rc), want);
	CHECK(eachobs_strerror(rc) != NULL, "strerror(%d) is NULL", rc);
	if (rc < 0) {
		CHECK(p.null_arg == 1 || it == NULL, "*it not NULL after failure");
		for (size_t i = 0; i < p.n; i++)
			CHECK(!atomic_load(&d.calls[i]), "getobs ran, start failed");
	} else {
		iterate(&d, it, &b, R, npos);
		eachobs_close(it);
		atomic_store(&d.closed, 1);
		if (!d.slot_overflow)
			CHECK(d.nslots <= slot_bound(&p), "%zu slots used, bound %zu",
			      d.nslots, slot_bound(&p));
	}
	/* Borrowed threads go back to the pool; the iterator's own are
	 * joined. */
	CHECK(threads_settle(base + (int)p.pool_n) == base + (int)p.pool_n,
	      "%d threads after close, %d before, %u in the pool", threads_now(),
	      base, p.pool_n);
	eachobs_pool_destroy(pool);
	CHECK(threads_settle(base) == base, "%d threads after the pool, %d before",
	      threads_now(), base);
	CHECK(eachobs_next(NULL, NULL, NULL) == -EINVAL, "next(NULL)");
	CHECK(eachobs_next_batch(NULL, NULL) == -EINVAL, "next_batch(NULL)");
	CHECK(eachobs_release(NULL, &d) == -EINVAL, "release(NULL, ...)");
	eachobs_close(NULL);
	eachobs_pool_destroy(NULL);
	pthread_mutex_destroy(&d.lock);
	return 0;
}
