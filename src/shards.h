/*
 * A stream's shards: which shard each place reads next, and what the
 * consumer has yielded of each, for checkpoints and resume.
 *
 * The epoch's shards for this rank are its shard order (a keyed
 * permutation of the stream's shards, sampler.c, then every shard_count-th
 * from shard_index) dealt to `nlists` lists: list j holds rank positions
 * j, j + nlists, j + 2 nlists, ... (unordered streams use one list that
 * every place takes from, ordered ones one list per place). A list hands
 * its shards out front to back; `taken` counts those handed out.
 *
 * Yielded records: a shard handed out and not yet complete is in flight,
 * with the records yielded as a prefix [0, k) and the few yielded beyond
 * it (a shuffle buffer yields out of order). A shard is complete when it
 * ended and every record was yielded (or its failed open was skipped);
 * complete shards are the handed-out ones not in flight. So the record is
 * O(lists + shards in flight + records in flight), whatever the epoch's
 * size.
 *
 * Resuming, the checkpoint's in-flight shards are handed out again first,
 * each list's in list order, with the records to drop (those yielded);
 * then the list goes on from where it stood.
 *
 * Knows nothing of iterators; the caller serializes every call (the
 * stream's lock).
 */
#ifndef EACHOBS_SHARDS_H
#define EACHOBS_SHARDS_H

#include "sampler.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A shard in flight. extra: records beyond k yielded, sorted. */
struct eachobs__inflight {
	uint64_t shard;  /* the stream's shard number */
	uint64_t at;     /* its index in its list */
	uint64_t k;      /* records [0, k) yielded */
	uint64_t total;  /* records, once it ended; UINT64_MAX before */
	uint64_t *extra;
	size_t nextra, cap;
	unsigned list;
	bool queued;     /* resumed, not handed out again yet */
};

struct eachobs__shard_list {
	uint64_t len;    /* shards in it */
	uint64_t taken;  /* handed out fresh: [0, taken) */
};

/* What a place must drop of the shard it was handed: records below k and
 * those listed (sorted); its own copy. */
struct eachobs__skip {
	uint64_t k;
	uint64_t *extra;
	size_t nextra;
};

struct eachobs__shards {
	struct eachobs__sampler order; /* the stream's shards, permuted */
	uint64_t rank_offset, rank_stride, rank_len; /* this rank's */
	uint64_t key;                  /* what a checkpoint must match */
	unsigned nlists;
	struct eachobs__shard_list *lists;
	struct eachobs__inflight *fly;
	size_t nfly, capfly;
	size_t hint;                   /* where the last lookup found one */
	bool broken;                   /* out of memory while growing */
	/* The consumer's, kept with the record: ordered, the place it takes
	 * from next; the shuffle buffer's draws so far. */
	uint64_t cursor, draws;
};

/* The shards of rank shard_index of shard_count (o's shuffle, seed,
 * epoch), in nlists lists. 0 or -ENOMEM; fini either way. */
int eachobs__shards_init(struct eachobs__shards *s, size_t nshards,
			 const eachobs_options *o, unsigned nlists,
			 uint64_t key);
void eachobs__shards_fini(struct eachobs__shards *s);
/* The shards rank shard_index of shard_count reads, of nshards (before
 * init: the caller sizes the lists by it). */
uint64_t eachobs__shards_of_rank(size_t nshards, const eachobs_options *o);
/* This rank's shards. */
static inline uint64_t eachobs__shards_rank_len(const struct eachobs__shards *s)
{
	return s->rank_len;
}
/* Take up a checkpoint of these shards: 0, -EINVAL (not one, damaged,
 * or of another stream or options) or -ENOMEM. */
int eachobs__shards_resume(struct eachobs__shards *s, const void *buf,
			   size_t len);

/* The next shard of list j into *shard, with what to drop of it; false
 * when the list has none left. skip->extra is the caller's to free. */
bool eachobs__shards_take(struct eachobs__shards *s, unsigned j,
			  uint64_t *shard, struct eachobs__skip *skip);
/* Whether list j has a shard left to hand out. */
bool eachobs__shards_left(const struct eachobs__shards *s, unsigned j);
/* Shard ended after `total` records (next() calls that returned 1 or
 * failed). */
void eachobs__shards_end(struct eachobs__shards *s, uint64_t shard,
			 uint64_t total);
/* The consumer yielded (or skipped) record r of shard; r ==
 * EACHOBS_STREAM_OPEN: its failed open was skipped. */
void eachobs__shards_yield(struct eachobs__shards *s, uint64_t shard,
			   uint64_t r);

/* The records of list j not yielded yet, given each shard's count (a
 * count of SIZE_MAX makes the answer UINT64_MAX); at start only. */
uint64_t eachobs__shards_remaining(const struct eachobs__shards *s, unsigned j,
				   size_t (*count)(void *, size_t), void *ctx);

/* Write the record into buf (room *len): 0 with *len the bytes, -ENOSPC
 * with *len those needed, -ENOMEM when it could not grow earlier. */
int eachobs__shards_write(const struct eachobs__shards *s, void *buf,
			  size_t *len);

#endif /* EACHOBS_SHARDS_H */
