/*
 * eachobs streams: datasets that are read front to back, in shards (tar
 * archives of samples, record files, a directory of files, a socket), not
 * indexed. Included by eachobs.h; since 0.5.
 *
 * A stream has nshards shards. Each is opened, read one record at a time
 * (next() writes a record into a slot of obs_size bytes that the library
 * owns) until it ends, and closed. The iterator is an ordinary
 * eachobs_iter: eachobs_next(), eachobs_next_batch(), hold and release,
 * DLPack, stats, interrupt, checkpoint and close work as they do for
 * eachobs_parallel().
 *
 * Interleaving: each loader reads one open shard at a time, front to back,
 * so P threads read P shards at once; no shard is ever read by two threads
 * at once, and a shard is read by one thread at a time from open to close
 * (a thread may hand an open shard to another between two records).
 *
 *   Unordered (the default): every loader takes the next shard of the
 *   epoch's shard order when its shard ends, and units are yielded as
 *   they are ready. A unit (a record, or a batch of batchsize records) is
 *   records of one place, in the order read: a batch may span the end of
 *   one shard and the start of the next; at the end of the epoch up to
 *   one batch per loading thread may be short.
 *
 *   Ordered (ordered = true, and always under EACHOBS_SERIAL): a
 *   deterministic interleave. The epoch's shard order is dealt to
 *   C = min(cycle_length, shards) places, place j reading shards j, j + C,
 *   j + 2C, ... of it one after the other; units are yielded round-robin
 *   over the places (a batch: batchsize consecutive records of one place),
 *   a place leaving the cycle when its shards are done. The sequence
 *   depends only on the shards' contents and (seed, epoch, cycle_length),
 *   never on nthreads, the executor or thread timing. At most C threads
 *   load at once; each place may have buffersize / C units waiting.
 *
 * Shuffle: with shuffle, the shard order is a permutation of the shards
 * that depends on (seed, epoch) only (as eachobs_parallel's order does).
 * With shuffle_buffer = S > 0, the consumer keeps the next S loaded units
 * it takes (in the order above) and yields a pseudo-random one of them,
 * drawn from (seed, epoch, draw number), as WebDataset's shuffle(S) does;
 * no unit is copied: the S are slots the loaders wrote. Ordered, the
 * sequence stays deterministic. A failure under STOP is not drawn: it is
 * yielded as soon as the consumer takes it.
 *
 * Ranks: with shard_count > 1, rank shard_index reads shards shard_index,
 * shard_index + shard_count, ... of the (shuffled) order: by shard, never
 * by record, without padding, so ranks may get different numbers of
 * records; see docs/guide.md ("Streams") to keep them in step.
 *
 * Records are named by their idx: EACHOBS_STREAM_IDX(shard, record), the
 * record counting from 0 in its shard (the next() calls that returned 1 or
 * failed). eachobs_next()'s *idx, a batch's idx[] and eachobs_failure.idx
 * are such names; a failed open() is named with record
 * EACHOBS_STREAM_OPEN.
 *
 * Memory: U units allocated at start, nothing grows with the records:
 * unordered U = buffersize + max(1, hold); ordered U = C * max(1,
 * (buffersize - S) / C) + S + max(1, hold); SERIAL the same with one unit
 * per place. At most buffersize units are loaded or being loaded ahead of
 * the consumer (ordered: per place, its share; unordered, the shuffle
 * buffer's S count among them). buffersize 0: the default for nthreads
 * (eachobs_options.buffersize) plus S.
 *
 * Checkpoints: eachobs_checkpoint() on a stream records, per place list,
 * the shards handed out and, per shard in flight, the records yielded
 * (records loaded but not yielded are read again on resume); its size
 * grows with the places and the shards and units in flight, not with the
 * shards or records of the epoch.
 *
 * Options that do not apply to a stream, ignored: indices, nindices,
 * basesize, oversubscription, autotune and autotune_start (nthreads
 * threads load). Errors under on_error = SKIP: a record whose next()
 * failed is left out (next() is called again for the following record: a
 * next() that cannot go on returns 0), a shard whose open() failed is left
 * out whole; both are counted in eachobs_failures().
 */
#ifndef EACHOBS_STREAM_H
#define EACHOBS_STREAM_H

#include "eachobs.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/** A stream: shards read front to back (see above). Add fields at the end
 *  only. Every callback may run on any worker thread, and under
 *  EACHOBS_THREADED and SERIAL on the consumer's, inside eachobs_next():
 *  for distinct shards concurrently, for one shard never. */
typedef struct eachobs_stream {
	/** Passed to every callback, never copied or freed; valid until
	 *  eachobs_close() returns. */
	void *ctx;
	/** Shards in all, 1 .. EACHOBS_STREAM_MAX_SHARDS. */
	size_t nshards;
	/** The most bytes of one record (its slot), 0 allowed. */
	size_t obs_size;
	/** Open shard: 0 with *state (anything; passed to next and close),
	 *  or a negative errno (the shard is not read). Required. */
	int (*open)(void *ctx, size_t shard, void **state);
	/** Write the shard's next record into obs (obs_size bytes, as a
	 *  getobs() slot: 64-byte aligned unbatched, eachobs_set_length()
	 *  for its size, eachobs_field() for fields, eachobs_cancelled()):
	 *  1: a record was written; 0: the shard ended (obs untouched); < 0:
	 *  an error (the record is named by the next record number). A
	 *  record larger than its slot: eachobs_set_length() refuses it, and
	 *  a next() that returns 1 all the same fails with -EMSGSIZE.
	 *  Required. */
	int (*next)(void *ctx, void *state, void *obs);
	/** Close what open() returned: once per successful open(), when the
	 *  shard ended, failed under STOP, or at eachobs_close() for a shard
	 *  still open. Required. */
	void (*close)(void *ctx, void *state);
	/** Optional (NULL: unknown): the records of shard, for
	 *  eachobs_length(); may return EACHOBS_LENGTH_UNKNOWN. Called at
	 *  start, on the calling thread, for each shard of this rank. */
	size_t (*count)(void *ctx, size_t shard);
	/** Optional: after open(), go to record `record` (0-based) of the
	 *  shard, so that a resumed iteration does not read the records
	 *  before it; 0 or a negative errno (a failure of that record).
	 *  NULL: records are read and dropped instead. */
	int (*seek)(void *ctx, void *state, size_t record);
} eachobs_stream;

/** Bits of an idx that name the record within its shard; the rest name
 *  the shard. */
#define EACHOBS_STREAM_RECORD_BITS 40
/** The most shards a stream may have (shard numbers fit 24 bits). */
#define EACHOBS_STREAM_MAX_SHARDS ((size_t)1 << 24)
/** The idx naming record `record` of shard `shard` (64-bit size_t). */
#define EACHOBS_STREAM_IDX(shard, record)                                   \
	(((size_t)(shard) << EACHOBS_STREAM_RECORD_BITS) | (size_t)(record))
/** The shard an idx names. */
#define EACHOBS_STREAM_SHARD(idx) ((size_t)(idx) >> EACHOBS_STREAM_RECORD_BITS)
/** The record within its shard an idx names. */
#define EACHOBS_STREAM_RECORD(idx)                                          \
	((size_t)(idx) & (((size_t)1 << EACHOBS_STREAM_RECORD_BITS) - 1))
/** The record of an idx naming a shard whose open() failed. */
#define EACHOBS_STREAM_OPEN (((size_t)1 << EACHOBS_STREAM_RECORD_BITS) - 1)
/** ordered: the default cycle_length. */
#define EACHOBS_STREAM_CYCLE 16u
/** eachobs_length() of an iteration whose length is not known at start. */
#define EACHOBS_LENGTH_UNKNOWN ((size_t)-1)

/** Start reading stream s into *it (NULL on failure), with opts (NULL:
 *  every default) of opts_size bytes, as eachobs_parallel_sized() starts a
 *  dataset: checks the arguments, calls count() for this rank's shards
 *  when it is set, allocates the units (see Memory) and starts the
 *  workers. *s is copied; s->ctx must stay valid until eachobs_close().
 *  eachobs_length() is the units it will yield when every count() is
 *  known and nothing fails: records, or ordered batches (each place's
 *  records / batchsize, rounded up, down with drop_last); unordered
 *  batched, EACHOBS_LENGTH_UNKNOWN. Resuming (opts->resume, a checkpoint
 *  of a stream), the records it did not yield are yielded, once each:
 *  the in-flight shards are read again from their start (or from the
 *  first record not yielded, with seek()), skipping what was yielded;
 *  nshards, shuffle, seed, epoch, shard_index, shard_count, ordered and
 *  cycle_length must match, the other options may differ.
 *  Returns 0, or as eachobs_parallel_sized() does, and -EINVAL also when
 *  s, open, next or close is NULL, nshards is 0 or exceeds
 *  EACHOBS_STREAM_MAX_SHARDS, buffersize is set and not above
 *  shuffle_buffer (unordered), or resume is not a checkpoint of this
 *  stream. Thread: any; blocks only to create threads. */
EACHOBS_API int eachobs_stream_parallel_sized(eachobs_iter **it,
					      const eachobs_stream *s,
					      const eachobs_options *opts,
					      size_t opts_size);

#ifndef EACHOBS_BUILDING
/** eachobs_stream_parallel_sized() with this header's
 *  sizeof(eachobs_options). Thread: any; blocks only to create threads. */
static inline int eachobs_stream_parallel(eachobs_iter **it,
					  const eachobs_stream *s,
					  const eachobs_options *opts)
{
	return eachobs_stream_parallel_sized(it, s, opts,
					     sizeof(eachobs_options));
}
#endif

#ifdef __cplusplus
}
#endif

#endif /* EACHOBS_STREAM_H */
