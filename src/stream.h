/*
 * The stream mode (stream.c): places that read shards front to back,
 * loaders that own a place at a time, and the consumer that takes units
 * from the places, unordered or round-robin, through an optional shuffle
 * buffer. start.c plans an iterator with it; iter.c sees only the mode
 * table.
 */
#ifndef EACHOBS_STREAM_MODE_H
#define EACHOBS_STREAM_MODE_H

#include "internal.h"

/* What the plan of a stream leaves start.c to do. */
struct eachobs__stream_plan {
	unsigned workers; /* threads to start */
	size_t nslots;    /* units to allocate */
};

/* Before the slots exist: make it->ms for stream s (copied) with options
 * o, the deterministic interleave or not (ordered, SERIAL), nthreads
 * threads at most and buffersize units (0: the default for
 * them, already resolved); set it->nunits, batchsize, cap and buffersize;
 * take up o->resume. 0 or a negative errno with the message set (the
 * mode's fini frees what was made). */
int eachobs__stream_prepare(eachobs_iter *it, const eachobs_stream *s,
			    const eachobs_options *o, bool deterministic,
			    unsigned nthreads, size_t buffersize,
			    struct eachobs__stream_plan *plan);

extern const struct eachobs__mode eachobs__stream_mode;

#endif /* EACHOBS_STREAM_MODE_H */
