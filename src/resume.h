/*
 * Checkpoint and resume: which units (observations, or batches) a consumer
 * has yielded, the bytes that record it, and, for a resumed iterator, the
 * map from the units it still has to do to the units of the original
 * iteration.
 *
 * Units are numbered in the iteration order (after the sampler and
 * batching). What a consumer has yielded is kept as sorted, disjoint spans
 * of units. Ordered it is one span, a prefix; unordered, work stealing
 * makes it more, but every gap between two spans holds a unit that is not
 * yielded yet, and those are either still in a worker's range (one range
 * per worker) or loaded and waiting (at most one per slot): so there are
 * at most workers + slots + 1 spans, whatever the number of units.
 *
 * A resumed iterator runs over "virtual" units [0, R), R being what was
 * left, each mapped to the original unit it stands for by
 * eachobs__remap_unit (a binary search over the left-over spans). Its
 * checkpoint is taken in original units, so it resumes like any other.
 *
 * Nothing here knows the iterator: the functions take these structs and
 * plain numbers, and run on the consumer's thread (eachobs__remap_unit on
 * any thread: it only reads).
 */
#ifndef EACHOBS_RESUME_H
#define EACHOBS_RESUME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Units [lo, hi). */
struct eachobs__span {
	uint64_t lo, hi;
};

/*
 * The units yielded so far. The unit being extended (`run`) is kept apart,
 * so that the common case, the next unit of the same worker's range, costs
 * one compare; it joins the sorted spans when another unit comes.
 */
struct eachobs__yielded {
	struct eachobs__span *spans; /* sorted, disjoint, not adjacent */
	size_t n, cap;
	struct eachobs__span run;    /* lo == hi: none */
	bool broken;                 /* out of memory while growing */
};

/* Room for cap spans at first (it grows if ever needed); 0 or -ENOMEM. */
int eachobs__yielded_init(struct eachobs__yielded *y, size_t cap);
void eachobs__yielded_fini(struct eachobs__yielded *y);
/* Move the run into the spans. */
void eachobs__yielded_flush(struct eachobs__yielded *y);

/* Unit u was yielded (or skipped, which counts as yielded). */
static inline void eachobs__yielded_add(struct eachobs__yielded *y,
					uint64_t u)
{
	if (u == y->run.hi && y->run.lo != y->run.hi) {
		y->run.hi++;
		return;
	}
	eachobs__yielded_flush(y);
	y->run.lo = u;
	y->run.hi = u + 1;
}

/* What a resumed iterator still has to do. */
struct eachobs__remap {
	struct eachobs__span *done;  /* original units yielded before */
	size_t ndone;
	struct eachobs__span *rest;  /* original units left, sorted */
	uint64_t *vstart;            /* virtual unit where rest[i] starts */
	size_t nrest;
	uint64_t total;              /* R: units left */
};

void eachobs__remap_fini(struct eachobs__remap *m);

/* The original unit that virtual unit v < m->total stands for. */
uint64_t eachobs__remap_unit(const struct eachobs__remap *m, uint64_t v);

/*
 * What a checkpoint must match to be resumed: the dataset's size, how
 * the units are cut, and a hash of the sampler and batching options.
 */
struct eachobs__ckpt_key {
	uint64_t numobs, npos, nunits, batchsize, config;
};

/* FNV-1a, 64 bits, continued from h (start with EACHOBS__FNV_BASIS). */
#define EACHOBS__FNV_BASIS 0xcbf29ce484222325ull
uint64_t eachobs__fnv(uint64_t h, const void *p, size_t len);

/*
 * Write the checkpoint of a consumer whose yielded units are y, for a
 * resumed iterator m (NULL: not resumed; y is then in original units,
 * else in virtual ones). On entry *len is the room in buf; 0 with *len the
 * bytes written, or -ENOSPC with *len the bytes needed (buf may then be
 * NULL), or -ENOMEM when y could not grow earlier.
 */
int eachobs__ckpt_write(const struct eachobs__ckpt_key *key,
			struct eachobs__yielded *y,
			const struct eachobs__remap *m, void *buf, size_t *len);

/*
 * Check a checkpoint against key and build the remap for what it leaves:
 * 0, -EINVAL (not a checkpoint, damaged, truncated, or taken for another
 * dataset or other options) or -ENOMEM. On failure *m owns nothing.
 */
int eachobs__ckpt_read(const struct eachobs__ckpt_key *key, const void *buf,
		       size_t len, struct eachobs__remap *m);

#endif /* EACHOBS_RESUME_H */
