/*
 * The units of memory that move between loaders and the consumer: a
 * buffer of observations and what their loaders said about them, and the
 * slot one unit is loaded into.
 */
#ifndef EACHOBS_SLOT_H
#define EACHOBS_SLOT_H

#include "base.h"

/*
 * What a consumer is handed: cap observations' memory and what their
 * loaders said about them. Unbatched, cap is 1; batched, cap is batchsize
 * and the observations lie obs_size bytes apart in data. Entries are
 * written by the thread that loads them before the slot is handed over
 * (ck_ring enqueue, the release store of `turn`, or the acq_rel count of
 * `done` for a batch filled by several threads), and read by the consumer
 * after it took the slot over, so they need no atomics.
 */
struct eachobs__buf {
	unsigned char *data; /* 64-byte aligned */
	size_t *idx;         /* dataset index of each entry */
	size_t *len;         /* bytes getobs wrote (eachobs_set_length) */
	int *status;         /* what getobs returned, mapped to <= 0 */
	size_t count;        /* consumer only: entries it yields */
};

/*
 * A slot: the place one unit (an observation, or a batch) is loaded into.
 * In ordered hold mode the consumer swaps the loaded buffer out for a spare
 * one (hold.c), so `b` belongs to the slot only while the slot is not
 * yielded. Ordered mode: slot s serves units s, s + W, s + 2W, ...; whose
 * move it is, is the window's place s (window.h).
 */
struct eachobs__slot {
	struct eachobs__buf b;
	/* What a loader writes per unit, on a line of its own, apart from the
	 * pointers above, which stay shared in every reader's cache. The
	 * unit being filled and, batched, the sharing of its entries among
	 * threads (load.c): claim is generation << 32 | next entry to claim;
	 * a slot is open to helpers while that entry is below count. */
	_Atomic size_t unit EACHOBS__ALIGNED;
	_Atomic size_t count;
	_Atomic size_t done;
	_Atomic uint64_t claim;
	/* Unbatched: the entry of the buffer this slot started with, on the
	 * same line as `unit`, so that the consumer takes one line from the
	 * loader per observation where separate arrays took three (unit,
	 * status, index). A buffer keeps its entry when hold swaps it
	 * out (hold.c): b's pointers travel with it. */
	struct {
		size_t idx, len;
		int status;
	} one;
} EACHOBS__ALIGNED;

/*
 * The consumer's first reads of a slot it takes, its unit line and its
 * first observation, are each a line the loader wrote: one cache miss
 * after another, most of the consumer's time with a cheap getobs (each
 * line comes from the loader's core). A consumer that asks for them
 * EACHOBS__PREFETCH_AHEAD slots early, once that slot is loaded and
 * visible to it, has them in flight while it yields the ones before.
 * Only a hint: of the slot, only its buffer's pointer is read (the
 * consumer's, while the slot is loaded), nothing the loader writes.
 */
enum { EACHOBS__PREFETCH_AHEAD = 2 };

static inline void eachobs__slot_prefetch(const struct eachobs__slot *slot)
{
	__builtin_prefetch(&slot->unit);
	__builtin_prefetch(slot->b.data);
}

#endif /* EACHOBS_SLOT_H */
