/*
 * Samplers (see sampler.h) and eachobs_seed.
 *
 * Shuffling without a table. A shuffled order of 2^40 positions would need
 * 8 TiB as a table, so the permutation is computed per position instead:
 * a Feistel network is a bijection of [0, 2^B) whatever its round function,
 * and cycle walking (apply it again until the value falls below L) turns
 * it into a bijection of [0, L): the walk from q < L follows q's cycle,
 * which comes back to q, so it always ends below L; and it is one-to-one
 * because walking back from the result with the inverse network, to the
 * first value below L, finds q again.
 *
 * The domain is the smallest power of two >= L, so fewer than half of its
 * values lie at or above L: a lookup takes fewer than two passes on
 * average, more than k with probability about 2^-k, and, deterministically,
 * at most 2^B - L + 1 <= L passes (the values it passes through are
 * distinct and all but the last lie outside [0, L)). A power of two with an
 * even exponent (equal halves) would waste up to three quarters of the
 * domain; instead the halves have ceil(B/2) and floor(B/2) bits and swap
 * widths every round, which is still a Feistel network: a round maps
 * (hi, lo) to (lo, hi ^ F(lo)), and F's output is cut to hi's width, so
 * (lo, hi) is recovered by undoing the xor. An even number of rounds leaves
 * the widths as they started.
 *
 * Round keys come from (seed, epoch, L) so that every epoch, and every
 * length, gets its own permutation; nothing else feeds them, so the
 * permutation is the same on every machine, thread count and executor.
 */
#include "error.h"
#include "sampler.h"

#include <errno.h>
#include <stdint.h>

/* Domain tags, so that a shuffle key never equals an observation seed
 * from the same (seed, epoch). ASCII "eachseed" and "eachshuf". */
#define TAG_SEED 0x6561636873656564ULL
#define TAG_SHUFFLE 0x6561636873687566ULL

/* A bijective 64-bit finalizer (the splitmix64 one, Stafford's variant
 * 13): every input bit affects every output bit with probability near
 * 1/2. */
static uint64_t mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

/* Fold x into the running hash h. For a fixed h it is a bijection of x
 * (and for a fixed x, of h), so distinct inputs at any one step never
 * collide; x is mixed before the xor so that structured inputs (small
 * counters) do not cancel structure in h. */
static uint64_t absorb(uint64_t h, uint64_t x)
{
	return mix(h ^ mix(x + 0x9e3779b97f4a7c15ULL));
}

unsigned long long eachobs_seed(unsigned long long seed,
				unsigned long long epoch, size_t idx)
{
	uint64_t h = absorb(TAG_SEED, seed);

	h = absorb(h, epoch);
	return absorb(h, (uint64_t)idx);
}

static uint64_t low_mask(unsigned bits)
{
	return ((uint64_t)1 << bits) - 1; /* bits <= 32 */
}

/* One pass of the network over x < 2^(hi_bits + lo_bits). */
static uint64_t feistel(const struct eachobs__sampler *s, uint64_t x)
{
	unsigned hb = s->hi_bits, lb = s->lo_bits;
	uint64_t hi = x >> lb, lo = x & low_mask(lb);

	for (unsigned r = 0; r < EACHOBS__FEISTEL_ROUNDS; r++) {
		uint64_t t = hi ^ (mix(lo ^ s->keys[r]) & low_mask(hb));
		unsigned w = hb;

		hi = lo;
		lo = t;
		hb = lb;
		lb = w;
	}
	return hi << lb | lo;
}

/* The shuffled position of q < L: walk until the value is in range. */
static size_t permute(const struct eachobs__sampler *s, size_t q)
{
	uint64_t x = q;

	do
		x = feistel(s, x);
	while (x >= s->order_len);
	return (size_t)x;
}

static void shuffle_init(struct eachobs__sampler *s, unsigned long long seed,
			 unsigned long long epoch)
{
	/* The smallest B with 2^B >= L; L >= 2 here, so L - 1 >= 1. */
	unsigned bits = 64 - (unsigned)__builtin_clzll(
				     (unsigned long long)(s->order_len - 1));
	uint64_t h = absorb(TAG_SHUFFLE, seed);

	h = absorb(h, epoch);
	h = absorb(h, (uint64_t)s->order_len);
	for (unsigned r = 0; r < EACHOBS__FEISTEL_ROUNDS; r++)
		s->keys[r] = absorb(h, r);
	s->hi_bits = (unsigned char)((bits + 1) / 2);
	s->lo_bits = (unsigned char)(bits / 2);
}

/* Positions per shard: padded up, or truncated down, to equal lengths. */
static size_t shard_len(size_t order_len, size_t count, bool drop_last)
{
	size_t whole = order_len / count;

	return drop_last ? whole : whole + (order_len % count != 0);
}

int eachobs__sampler_init(struct eachobs__sampler *s, size_t n,
			  const eachobs_options *o)
{
	static const eachobs_options defaults;
	struct eachobs__sampler t = { 0 };

	if (!o)
		o = &defaults;
	if (!o->indices && o->nindices)
		return eachobs__fail(-EINVAL, "indices is NULL with nindices %zu",
				     o->nindices);
	if (o->shard_count > 1 && o->shard_index >= o->shard_count)
		return eachobs__fail(-EINVAL,
				     "shard_index %u is not below shard_count "
				     "%u",
				     o->shard_index, o->shard_count);
	for (size_t i = 0; i < o->nindices; i++)
		if (o->indices[i] >= n)
			return eachobs__fail(-EINVAL,
					     "indices[%zu] = %zu is not below "
					     "the %zu that data->numobs "
					     "returned",
					     i, o->indices[i], n);
	t.indices = o->indices;
	t.order_len = o->indices ? o->nindices : n;
	t.shard_count = o->shard_count > 1 ? o->shard_count : 1;
	t.len = shard_len(t.order_len, t.shard_count, o->drop_last);
	/* Padding wraps around to the order's start, more than once when
	 * L < shard_count: shard s starts at position s mod L. */
	if (t.shard_count > 1 && t.order_len)
		t.shard_offset = o->shard_index % t.order_len;
	t.shuffle = o->shuffle && t.order_len >= 2;
	if (t.shuffle)
		shuffle_init(&t, o->seed, o->epoch);
	t.identity = !t.indices && !t.shuffle && t.shard_count == 1;
	*s = t;
	return 0;
}

/*
 * Shard position pos < len to a position in the padded or truncated order,
 * (shard_offset + pos * shard_count) mod L, without overflow: pos is below
 * ceil(L / count), so pos * count < L, and the offset is below L too.
 */
static size_t order_position(const struct eachobs__sampler *s, size_t pos)
{
	size_t q = pos * s->shard_count, room = s->order_len - s->shard_offset;

	return q >= room ? q - room : q + s->shard_offset;
}

size_t eachobs__sampler_map(const struct eachobs__sampler *s, size_t pos)
{
	size_t q = order_position(s, pos);

	if (s->shuffle)
		q = permute(s, q);
	return s->indices ? s->indices[q] : q;
}
