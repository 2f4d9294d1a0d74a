/*
 * Samplers: which dataset index the iteration visits at each position.
 *
 * A sampler is a pure function from a position in [0, len) to a dataset
 * index, fixed at start from eachobs_options (indices, shuffle, seed,
 * epoch, shard_index, shard_count, drop_last). It holds no memory that
 * grows with the dataset and changes nothing after init, so any thread may
 * call eachobs__sampler_index at any time, for positions in any order.
 *
 * Position pos goes through three steps:
 *   1. sharding: pos in the shard becomes position q in the (padded or
 *      truncated) order, q = (shard_index + pos * shard_count) mod L;
 *   2. shuffling: q becomes perm(q), a keyed bijection of [0, L);
 *   3. the order: perm(q) becomes indices[perm(q)], or perm(q) itself.
 * The iterator is expected to hand positions to its workers where it now
 * hands out indices, and to map each one just before its getobs.
 */
#ifndef EACHOBS_SAMPLER_H
#define EACHOBS_SAMPLER_H

#include "eachobs.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Rounds of the shuffle's Feistel network. Four make a strong pseudo-random
 * permutation for random round functions (Luby-Rackoff); small domains,
 * where each half has only a few bits, need more to look random. Even, so
 * that the halves end where they started (see sampler.c). */
#define EACHOBS__FEISTEL_ROUNDS 8

struct eachobs__sampler {
	const size_t *indices; /* NULL: the order is 0 .. order_len-1 */
	size_t order_len;      /* L */
	size_t len;            /* positions this iteration visits */
	size_t shard_count;    /* 1: no sharding */
	size_t shard_offset;   /* shard_index mod L: where the shard starts */
	bool identity;         /* index(pos) == pos: the fast path */
	bool shuffle;          /* only when L >= 2: else nothing to permute */
	/* The shuffle's bijection of [0, 2^(hi_bits + lo_bits)), the smallest
	 * power of two >= L; see sampler.c. */
	unsigned char hi_bits, lo_bits;
	uint64_t keys[EACHOBS__FEISTEL_ROUNDS];
};

/*
 * Validate the sampler fields of o (NULL: every default) against a dataset
 * of n observations and fill s. 0, or -EINVAL (an indices entry >= n,
 * indices NULL with nindices > 0, shard_index >= shard_count > 1), in which
 * case s is untouched. O(nindices) for the range check, O(1) otherwise; no
 * allocation.
 */
int eachobs__sampler_init(struct eachobs__sampler *s, size_t n,
			  const eachobs_options *o);

/* Number of positions this iteration visits (after sharding). */
static inline size_t eachobs__sampler_len(const struct eachobs__sampler *s)
{
	return s->len;
}

/* The general case of eachobs__sampler_index; call that instead. */
size_t eachobs__sampler_map(const struct eachobs__sampler *s, size_t pos);

/*
 * The dataset index at position pos < len. Pure and thread-safe. Inline so
 * that the default sampler (no indices, no shuffle, no shards) costs the
 * iterator a predictable branch and nothing else.
 */
static inline size_t eachobs__sampler_index(const struct eachobs__sampler *s,
					    size_t pos)
{
	if (s->identity)
		return pos;
	return eachobs__sampler_map(s, pos);
}

#endif /* EACHOBS_SAMPLER_H */
