/*
 * eachobs: load a dataset's observations in parallel, on threads, into
 * preallocated slots that the consumer reads in place.
 *
 * A dataset (eachobs_dataset) counts its observations (numobs) and writes
 * observation idx into a slot of obs_size bytes that the library owns
 * (getobs). eachobs_parallel() calls numobs() once, allocates every slot
 * and starts the workers; eachobs_next() yields one loaded observation at a
 * time (eachobs_next_batch() a batch); eachobs_close() stops at any point.
 *
 * Ownership: a slot is written once per observation, by the thread running
 * its getobs, and read in place: nothing is copied on the way. A yielded
 * item stays valid and unchanged until the consumer's next eachobs_next() /
 * eachobs_next_batch() or eachobs_close() (with hold, until
 * eachobs_release()); then its slot may be reused.
 *
 * Memory: allocated at start; nothing grows with the number of
 * observations. A unit (an observation, or a batch when batchsize > 0) has
 * a buffer of obs_size (times batchsize) bytes rounded up to a multiple of
 * 64 (at least 64; with fields, each field's array is rounded up), and an
 * index, a length and a status word per observation. There are
 * U = buffersize + workers + max(1, hold) units, workers being nthreads,
 * or fewer when there are fewer tasks (the threads started,
 * eachobs_stats.nworkers, but for autotune, which may start fewer
 * later). At most buffersize loaded units wait
 * for the consumer. Under EACHOBS_SERIAL, and when there is nothing to
 * load, U = max(1, hold) (ordered with hold > 0 and nothing to load:
 * 2 * hold).
 *
 * Threading: iterators are independent, and each has one consumer: calls
 * marked "consumer" must not run concurrently on one iterator, but may come
 * from different threads in turn. getobs() runs concurrently on several
 * threads, for distinct indices, and under EACHOBS_THREADED and SERIAL also
 * on the consumer's, inside eachobs_next(); numobs() on the thread calling
 * eachobs_parallel().
 * Any thread or signal handler may call eachobs_interrupt(). Worker threads
 * block asynchronous signals (all but SIGSEGV, SIGBUS, SIGFPE, SIGILL,
 * SIGTRAP, SIGABRT, SIGSYS and SIGPROF): handlers run on the program's own.
 *
 * Errors: 0 (1: an item) or a negative errno value, never through errno;
 * codes from getobs() pass through unchanged but -EINTR (eachobs_next).
 * eachobs_strerror() names every code; eachobs_last_error() says what the
 * last failure found wrong.
 *
 * Versions and compatibility: EACHOBS_VERSION_HEX is the header a program
 * was built with, eachobs_version() the library it runs with,
 * libeachobs.so.0 throughout 0.x, which runs binaries built against any
 * earlier 0.x header: the API only grows. eachobs_dataset, eachobs_batch
 * and eachobs_failure are frozen; eachobs_options and eachobs_stats grow by
 * appended fields whose zero keeps the old behaviour, and travel with their
 * size (the inline eachobs_parallel() and eachobs_get_stats() pass this
 * header's to the _sized functions; bindings pass their own). An older
 * library fails with -E2BIG on a set option it does not have, and leaves
 * stats it does not count at 0.
 */
#ifndef EACHOBS_H
#define EACHOBS_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(EACHOBS_BUILDING) && defined(__GNUC__)
#define EACHOBS_API __attribute__((visibility("default")))
#else
#define EACHOBS_API
#endif

/** The major version of this header (0 until the API is declared stable). */
#define EACHOBS_VERSION_MAJOR 0
/** The minor version: it grows with every release that adds to the API. */
#define EACHOBS_VERSION_MINOR 5
/** The patch version: fixes only. */
#define EACHOBS_VERSION_PATCH 0
/** This header's version, (major << 16) | (minor << 8) | patch. */
#define EACHOBS_VERSION_HEX                                                 \
	((EACHOBS_VERSION_MAJOR << 16) | (EACHOBS_VERSION_MINOR << 8) |     \
	 EACHOBS_VERSION_PATCH)

/** A dataset: what the library needs to load observation idx. */
typedef struct eachobs_dataset {
	/** Passed to both callbacks, never copied or freed; valid until
	 *  eachobs_close() returns. */
	void *ctx;
	/** The number of observations. Required; called exactly once, inside
	 *  eachobs_parallel(), on its thread. */
	size_t (*numobs)(void *ctx);
	/** Write observation idx into obs: obs_size bytes the library owns,
	 *  64-byte aligned and never NULL (in a batch, obs_size bytes after the
	 *  previous one, only as aligned as that allows; with fields, obs is
	 *  field 0, eachobs_field() the others). Required. Called once per
	 *  position of the iteration order (each idx in [0, n), or once per
	 *  visit of a sampler), fewer after close or an error, concurrently
	 *  for distinct indices: it must be thread-safe for them. Returns 0 or
	 *  a negative code (see eachobs_on_error); a positive value breaks this
	 *  contract and is reported as -ERANGE, -EINTR as -ERESTART. */
	int (*getobs)(void *ctx, size_t idx, void *obs);
	/** Bytes of one observation slot; 0 is allowed (index-only data). */
	size_t obs_size;
} eachobs_dataset;

/** Who runs getobs(). */
typedef enum eachobs_executor {
	/** The default: workers, and an eachobs_next() that finds nothing
	 *  ready runs a pending getobs() itself instead of sleeping. */
	EACHOBS_THREADED = 0,
	/** Workers only: the consumer's thread never runs getobs(). */
	EACHOBS_BACKGROUND,
	/** No threads: getobs() runs inside eachobs_next(), in iteration
	 *  order. Ignores nthreads (but for its bound), basesize,
	 *  oversubscription, buffersize, stack_size, worker_cpus, worker_nice,
	 *  pool and ordered. */
	EACHOBS_SERIAL,
} eachobs_executor;

/** What a failing getobs() does to the iteration. */
typedef enum eachobs_on_error {
	/** The default: eachobs_next() returns the failure's code (ordered:
	 *  after every earlier position) and keeps returning it. */
	EACHOBS_ON_ERROR_STOP = 0,
	/** The observation is left out and the iteration goes on (ordered
	 *  output stays ordered); see eachobs_failures(). */
	EACHOBS_ON_ERROR_SKIP,
} eachobs_on_error;

/** A set of persistent worker threads that iterators borrow; opaque. */
typedef struct eachobs_pool eachobs_pool;

/** Where the unit buffers (see Memory) come from: pinned, huge-page,
 *  NUMA-local or shared memory. alloc runs only in eachobs_parallel(), on
 *  its thread, and returns size bytes aligned to align (a power of two,
 *  64 or more) or NULL (then -ENOMEM; misaligned: -EINVAL). Each block
 *  goes back to free, with its size, once: in eachobs_close(), when start
 *  fails, or when the last DLPack tensor of the iterator's items is
 *  deleted, on that thread. The functions and ctx must live until then. */
typedef struct eachobs_allocator {
	void *(*alloc)(void *ctx, size_t size, size_t align); /**< NULL: fail */
	void (*free)(void *ctx, void *ptr, size_t size);      /**< required */
	void *ctx; /**< passed to both */
} eachobs_allocator;

/** Options. All-zero (or a NULL pointer) means every default; use
 *  designated initializers: `{ .nthreads = 8, .ordered = true }`. */
typedef struct eachobs_options {
	/** Worker threads, at most EACHOBS_MAX_THREADS (fewer start when there
	 *  are fewer tasks). 0: with a pool, its size; else the CPUs this
	 *  process may use, counted at every start: the caller's CPU affinity,
	 *  capped by a cgroup v2 CPU quota rounded up, at least 1. */
	unsigned nthreads;
	/** Observations per task (rounded up to whole batches), the unit in
	 *  which work is split and stolen (unordered). 0: ceil(n /
	 *  (oversubscription * nthreads)). Ordered, a worker claims at most
	 *  max(1, buffersize / (2 * nthreads)) positions at a time. */
	size_t basesize;
	/** Tasks per thread when basesize is 0; 0: the default. */
	unsigned oversubscription;
	/** Loaded units that may wait for the consumer (see Memory), at most
	 *  EACHOBS_MAX_SLOTS. 0: the largest of EACHOBS_DEFAULT_BUFFER_MIN,
	 *  EACHOBS_DEFAULT_BUFFER_PER_THREAD * nthreads and the units (each
	 *  counted as at least 64 bytes) that fit EACHOBS_DEFAULT_BUFFER_BYTES,
	 *  at most EACHOBS_DEFAULT_BUFFER_MAX (ordered and unbatched:
	 *  EACHOBS_DEFAULT_ORDERED_BUFFER_MAX); batched, the same with
	 *  EACHOBS_DEFAULT_BATCH_BUFFER_MIN and _PER_THREAD instead. */
	size_t buffersize;
	/** Who runs getobs(); EACHOBS_THREADED by default. */
	eachobs_executor executor;
	/** Yield in iteration order (by index, or the sampler's): workers take
	 *  positions from one counter, and the W = U - hold buffers not held
	 *  (see Memory) form a reorder window: position i is loaded once the
	 *  consumer let go of position i - W, so the one it waits for is always
	 *  being loaded. false (the default): the order of yield varies from
	 *  run to run (what is visited, the batches and eachobs_seed() draws
	 *  do not), so a run replays from its seed only ordered (or SERIAL). */
	bool ordered;
	/** Stack bytes of each worker the iterator creates, at least
	 *  PTHREAD_STACK_MIN; 0: EACHOBS_DEFAULT_STACK_SIZE. */
	size_t stack_size;
	/** What a failing getobs() does; EACHOBS_ON_ERROR_STOP by default. */
	eachobs_on_error on_error;
	/** NULL, or the CPUs (each below EACHOBS_MAX_CPU) the workers, created
	 *  or borrowed, may run on; -EAGAIN if the process may use none. */
	const unsigned *worker_cpus;
	/** Entries in worker_cpus; 0: no restriction (borrowed threads: the
	 *  pool's CPUs). */
	unsigned nworker_cpus;
	/** 0: workers run at the caller's nice value (borrowed: the pool's);
	 *  1..19: at this one, so the training thread wins a core both want
	 *  (below the caller's: only where the process may lower it). */
	int worker_nice;
	/** 0: observations, through eachobs_next(). 1 .. EACHOBS_MAX_BATCHSIZE:
	 *  batches, through eachobs_next_batch(): batch k is positions
	 *  [k * batchsize, (k + 1) * batchsize) of the iteration order, in
	 *  order, obs_size bytes apart in one buffer that getobs() writes in
	 *  place; unordered, yielded as they complete. The batch is then the
	 *  unit. Workers without a batch help fill others', so nthreads is not
	 *  capped by the number of batches. */
	size_t batchsize;
	/** Drop a last batch smaller than batchsize (never loaded), and with
	 *  shards, truncate the order to a multiple of shard_count instead of
	 *  padding it. */
	bool drop_last;
	/** 0: an item stays valid until the consumer's next call. K > 0 (at
	 *  most EACHOBS_MAX_SLOTS): up to K items stay valid until
	 *  eachobs_release(), in any order; with K held, the next call returns
	 *  -ENOBUFS. Ordered, held items are swapped out of the window (no
	 *  copy) and do not hold it up. */
	unsigned hold;
	/** NULL: the iterator creates its workers, joined at close. Else a pool
	 *  that outlives the iterator, whose idle threads it borrows until
	 *  close, creating its own for the rest (iterators on a pool never wait
	 *  for each other). A lent thread keeps the pool's stack size, serves
	 *  one iterator at a time and takes on its worker_cpus and worker_nice
	 *  (else the pool's) before its first getobs; one that cannot reach
	 *  them is not lent. */
	eachobs_pool *pool;
	/** The order one pass visits, of length L: 0 .. n-1, or
	 *  indices[0 .. nindices), each below n, repeats allowed; not copied
	 *  (valid and unchanged until eachobs_close() returns). shuffle
	 *  permutes it, then sharding keeps one shard; *idx is always the
	 *  dataset index. */
	const size_t *indices;
	/** Entries in indices; 0 with indices set: an empty order. */
	size_t nindices;
	/** Visit a permutation of the order that depends only on (order, seed,
	 *  epoch), on every machine, nthreads and executor; computed per
	 *  position, so nothing grows with L. */
	bool shuffle;
	/** Shuffle key; 0 is a seed like any other. Ignored unless shuffle. */
	unsigned long long seed;
	/** The pass number: bump it each epoch for a new permutation. Ignored
	 *  unless shuffle. */
	unsigned long long epoch;
	/** With shard_count > 1, the shard s visited, below shard_count: as
	 *  with PyTorch's DistributedSampler, positions s, s + shard_count, ...
	 *  of the (shuffled) order, padded by wrapping around to its start,
	 *  ceil(L / shard_count) of them (drop_last: truncated, floor). Shards
	 *  are disjoint apart from the padding. */
	unsigned shard_index;
	/** Shards in all; 0 or 1: no sharding. */
	unsigned shard_count;
	/** NULL, or resume_len bytes from eachobs_checkpoint() (since 0.2),
	 *  read at start only: the iterator yields, once each (ordered: in
	 *  order), the items the checkpoint did not record. numobs and what
	 *  makes the order (indices' contents; shuffle, and seed and epoch
	 *  when shuffling; shard_index and shard_count when sharding;
	 *  batchsize; drop_last) must match; the other options may differ. */
	const void *resume;
	/** Bytes at resume; 0 exactly when resume is NULL. */
	size_t resume_len;
	/** NULL, or the allocator of the unit buffers (copied; since 0.2). */
	const eachobs_allocator *allocator;
	/** NULL, or the bytes of the nfields fields of an observation (since
	 *  0.3; copied), summing to obs_size: a unit holds one 64-byte aligned
	 *  array per field, entry j's field k at eachobs_field_data(it, data,
	 *  k) + j * fields[k]. getobs()'s obs is field 0 (eachobs_field()
	 *  gives each); lengths count field 0's bytes. */
	const size_t *fields;
	/** Entries in fields, at most EACHOBS_MAX_FIELDS; 0: one field. */
	size_t nfields;
	/** Let the iterator choose, while it runs, how many threads load (since
	 *  0.4; SERIAL ignores it). nthreads is then the most (0: a pool's
	 *  size, else max(EACHOBS_AUTOTUNE_THREADS, the CPUs), at most
	 *  EACHOBS_MAX_THREADS), buffersize the default for that many, and
	 *  memory the usual buffersize + nthreads + max(1, hold) units. It
	 *  starts autotune_start threads and measures, over intervals of a few
	 *  getobs durations: a consumer that waits gets more threads while
	 *  throughput rises (for a getobs that computes, past the CPUs only
	 *  while it clearly does); one that does not gets the fewest that keep
	 *  it fed. Threads are started when first needed; those not loading
	 *  sleep. It also sets how many loaded units may wait for the
	 *  consumer (eachobs_stats.buffer_depth, at most buffersize).
	 *  Ordered, a claim takes buffer_depth / (2 * loading) positions.
	 *  What is yielded is unchanged; eachobs_stats says what it chose and
	 *  why. */
	bool autotune;
	/** With autotune, the threads loading at first; 0: what the last
	 *  autotuned iterator on pool ended with, else the CPUs (under
	 *  THREADED one fewer: the consumer loads too). Passing the
	 *  previous epoch's eachobs_stats.nloading starts where it ended. */
	unsigned autotune_start;
	/** Streams only (eachobs_stream_parallel(), since 0.5;
	 *  eachobs_parallel() ignores it): ordered, the open shards the
	 *  deterministic interleave cycles over, and so the most threads
	 *  that load at once; 0: EACHOBS_STREAM_CYCLE. */
	unsigned cycle_length;
	/** Streams only (eachobs_parallel() ignores it): the shuffle
	 *  buffer, in units (0: none): the consumer
	 *  yields a pseudo-random one of the next shuffle_buffer loaded
	 *  units instead of the oldest (see eachobs_stream.h). */
	size_t shuffle_buffer;
} eachobs_options;

/** Autotune's default bound on threads: a getobs that waits 5 ms needs
 *  about 64 to reach its best rate even on 2 cores. */
#define EACHOBS_AUTOTUNE_THREADS 64u

#define EACHOBS_MAX_FIELDS 64u   /**< upper bound on nfields */
#define EACHOBS_MAX_CPU 1024u    /**< worker_cpus entries are below this */
#define EACHOBS_MAX_THREADS 1024u /**< upper bound on nthreads */
/** Upper bound on hold and, except under EACHOBS_SERIAL, on
 *  buffersize + nthreads + max(1, hold) (see Memory). */
#define EACHOBS_MAX_SLOTS (1u << 24)
#define EACHOBS_DEFAULT_OVERSUBSCRIPTION 8u /**< tasks per thread, basesize 0 */
/* Default buffersize (eachobs_options.buffersize): */
#define EACHOBS_DEFAULT_BUFFER_MIN 16u          /**< at least this many, */
#define EACHOBS_DEFAULT_BUFFER_PER_THREAD 4u    /**< this many a worker, */
#define EACHOBS_DEFAULT_BUFFER_BYTES ((size_t)256 << 10) /**< what fits, */
#define EACHOBS_DEFAULT_BUFFER_MAX 256u         /**< up to this many, */
/** ... or this many when ordered and unbatched: the consumer waits for one
 *  loader's position, and a deeper window keeps the other loaders busy
 *  while that one is off a core (4096 slots of 64 bytes: 256 KiB); */
#define EACHOBS_DEFAULT_ORDERED_BUFFER_MAX 4096u
#define EACHOBS_DEFAULT_BATCH_BUFFER_MIN 2u     /**< batched: at least, */
#define EACHOBS_DEFAULT_BATCH_BUFFER_PER_THREAD 2u /**< and a worker. */
/** Upper bound on eachobs_options.batchsize. */
#define EACHOBS_MAX_BATCHSIZE ((size_t)1 << 31)

/** Failures eachobs_failures() keeps (the first ones, in yield order). */
#define EACHOBS_FAILURES_KEPT 16u

/** A getobs() failure that was skipped. */
typedef struct eachobs_failure {
	size_t idx; /**< the observation's index */
	int code;   /**< its getobs() code (as eachobs_next() reports it) */
} eachobs_failure;

/** Default worker stack size (see eachobs_options.stack_size). */
#define EACHOBS_DEFAULT_STACK_SIZE ((size_t)2 << 20)

/** An iterator; opaque. */
typedef struct eachobs_iter eachobs_iter;

/** Create in *pool (NULL on failure) nthreads (1 .. EACHOBS_MAX_THREADS)
 *  persistent workers, asleep until an iterator borrows them, on the
 *  calling thread's CPUs and nice value. Returns 0; -EINVAL when pool is
 *  NULL or nthreads out of range; -ENOMEM (a thread's attributes
 *  included); -EAGAIN when a thread cannot be created (nothing is left
 *  running or allocated on failure).
 *  Thread: any; blocks only to create threads. */
EACHOBS_API int eachobs_pool_create(eachobs_pool **pool, unsigned nthreads);

/** Stop and free pool (NULL: nothing happens): wait until its iterators
 *  are closed, then join its threads. Thread: any but the consumer of an
 *  open iterator on it (it would wait for itself); blocks until then. */
EACHOBS_API void eachobs_pool_destroy(eachobs_pool *pool);

/** Start loading data into *it (NULL on failure), with opts (NULL: every
 *  default) of opts_size bytes: sizeof(eachobs_options) in the caller's
 *  header, at least its 0.1 size (through shard_count), fields past it
 *  read as zero. Checks the arguments, calls numobs() once, allocates the
 *  U units (see Memory) and starts the workers (none under EACHOBS_SERIAL
 *  or with nothing to load). *data and *opts are copied; data->ctx,
 *  indices and pool must stay valid until eachobs_close(), worker_cpus and
 *  resume are read during this call only.
 *  Returns 0;
 *    -EINVAL when it, data, numobs or getobs is NULL; opts_size is below
 *      the 0.1 size; executor or on_error is out of range; nthreads,
 *      batchsize or hold exceeds its bound; stack_size is non-zero and
 *      below PTHREAD_STACK_MIN; worker_nice is outside 0..19; a
 *      worker_cpus entry is not below EACHOBS_MAX_CPU; worker_cpus or
 *      indices is NULL with a non-zero count; an indices entry is not
 *      below n; shard_index >= shard_count > 1; only one of resume and
 *      resume_len is zero; resume is not a checkpoint of this iteration
 *      (other numobs or order, damaged or truncated); alloc or free is
 *      NULL, or alloc's block is misaligned; fields is NULL with nfields
 *      set, nfields exceeds EACHOBS_MAX_FIELDS, or fields do not sum to
 *      obs_size; buffersize + nthreads +
 *      max(1, hold) exceeds EACHOBS_MAX_SLOTS, or the units' bytes overflow
 *      size_t;
 *    -E2BIG when opts_size exceeds this library's eachobs_options and a
 *      byte past its end is not zero (an option it does not have);
 *    -ENOMEM when an allocation fails, the allocator's and a thread's
 *      attributes' included;
 *    -EAGAIN when a thread cannot be created (resource limits, a
 *      stack_size the system refuses), or no CPU of worker_cpus is usable;
 *    -EACCES when worker_nice is below the calling thread's nice value
 *      and this process may not lower one (CAP_SYS_NICE, RLIMIT_NICE).
 *  On failure no getobs() has run (numobs() may have, except for -E2BIG
 *  and the opts_size -EINVAL), the threads started have been joined and
 *  nothing is left allocated.
 *  Thread: any; blocks only to create threads. */
EACHOBS_API int eachobs_parallel_sized(eachobs_iter **it,
				       const eachobs_dataset *data,
				       const eachobs_options *opts,
				       size_t opts_size);

#ifdef EACHOBS_BUILDING
/* Inside the library: the exported entry point of 0.1.0, kept for binaries
 * built against that header, which passed no size (src/abi.c). */
EACHOBS_API int eachobs_parallel(eachobs_iter **it, const eachobs_dataset *data,
				 const eachobs_options *opts);
#else
/** Start loading data: eachobs_parallel_sized() with this header's
 *  sizeof(eachobs_options), inline so that the program carries its size.
 *  Returns as that does: 0, -EINVAL, -E2BIG, -ENOMEM, -EAGAIN, -EACCES.
 *  Thread: any; blocks only to create threads. */
static inline int eachobs_parallel(eachobs_iter **it,
				   const eachobs_dataset *data,
				   const eachobs_options *opts)
{
	return eachobs_parallel_sized(it, data, opts, sizeof(eachobs_options));
}
#endif

/** Yield the next observation: give back the previous one (hold 0), then
 *  wait until one is loaded (ordered: the next in iteration order); under
 *  EACHOBS_THREADED a call that finds none loads one itself, under SERIAL
 *  every call does. *obs (obs may be NULL) receives its obs_size bytes,
 *  NULL unless 1 is returned; *idx (idx may be NULL) its dataset index, or
 *  with a getobs() code the failed index; else it is untouched.
 *  Returns 1: an observation was yielded;
 *    0: every observation was yielded (also with some held), and on every
 *      later call;
 *    c < 0: a getobs() code (-ERANGE for a positive value) under
 *      EACHOBS_ON_ERROR_STOP, ordered once every earlier position was
 *      yielded; sticky: every later call returns it, with the same *idx;
 *    -EINTR after eachobs_interrupt(), only; not sticky: call again to go
 *      on (a getobs() returning -EINTR, a system call a signal cut short,
 *      gives -ERESTART, sticky: retry inside getobs(), or use SA_RESTART);
 *    -ENOBUFS when hold items are held; not sticky: release one (from a
 *      getobs(), -ENOBUFS is sticky like any code);
 *    -EINVAL when it is NULL or batched.
 *  Thread: the consumer. Sleeps until an item, the end, a failure or an
 *  interrupt. */
EACHOBS_API int eachobs_next(eachobs_iter *it, const void **obs, size_t *idx);

/** A batch of observations (eachobs_options.batchsize > 0). */
typedef struct eachobs_batch {
	/** count observations, obs_size bytes apart, 64-byte aligned (with
	 *  fields: field 0's array; eachobs_field_data() finds the others);
	 *  valid as eachobs_next()'s are (see hold). */
	void *data;
	/** Their dataset indices, in batch order. */
	const size_t *idx;
	/** batchsize, or fewer (a last batch, or skipped observations). */
	size_t count;
	/** Bytes getobs() wrote for each (eachobs_set_length()); the rest of
	 *  each place is stale, not zeros. */
	const size_t *lengths;
} eachobs_batch;

/** Yield the next batch into *batch, as eachobs_next() yields observations;
 *  unless 1 is returned, *batch is zeroed but idx, which with a getobs()
 *  code points to the failed index. A failing getobs() fails its batch.
 *  Under EACHOBS_ON_ERROR_STOP no more getobs() starts for it or later
 *  batches (unordered: any), so idx is a failed index, maybe not the first.
 *  Under SKIP the rest of the batch moves down over failed observations
 *  (the only time observation bytes move) and count shrinks; a batch with
 *  none left is skipped.
 *  Returns as eachobs_next(): 1, 0, a sticky getobs() code, -EINTR,
 *    -ENOBUFS; -EINVAL when batch (nothing written) or it is NULL, or it is
 *    not batched.
 *  Thread: the consumer. Sleeps as eachobs_next() does. */
EACHOBS_API int eachobs_next_batch(eachobs_iter *it, eachobs_batch *batch);

/** The items it yields from start to end when no getobs() fails, known
 *  before the first: observations, or batches after drop_last; resumed,
 *  what the checkpoint left. NULL gives 0. Thread: any, while it is open;
 *  O(1). */
EACHOBS_API size_t eachobs_length(const eachobs_iter *it);

/** Most bytes of eachobs_checkpoint() with default options and at most 64
 *  threads. */
#define EACHOBS_CHECKPOINT_MAX_DEFAULT ((size_t)64 << 10)

/** Write to buf, with room for *len bytes, a checkpoint of the items it
 *  has yielded, so that an iterator given it in eachobs_options.resume
 *  yields exactly the rest; *len receives the bytes written, or with
 *  -ENOSPC those needed (buf may be NULL if *len is 0). Items returned
 *  before count as yielded, held or not, and so do skipped ones; a failure
 *  under STOP does not (it is retried). Callable between any two consumer
 *  calls, also after the end or an error, or when resumed (the record
 *  includes the earlier part); iteration goes on. The record checks
 *  itself and has no pointers (one machine): 72 bytes plus 16 per run of
 *  yielded items, one run ordered or SERIAL, unordered at most
 *  workers + U + 1 (see Memory) whatever n; each resume can add as much
 *  again.
 *  Returns 0; -ENOSPC when the room is too small (nothing else changes);
 *    -EINVAL when it or len is NULL, or buf is NULL with *len > 0; -ENOMEM
 *    when the record of yielded items could not grow earlier.
 *  Thread: the consumer, between calls; reads only its own record. */
EACHOBS_API int eachobs_checkpoint(eachobs_iter *it, void *buf, size_t *len);

/** Give back data, an item held with hold > 0 (an observation, or a
 *  batch's data), in any order; its memory may be reused from then on.
 *  Returns 0; -EINVAL when it or data is NULL, hold is 0, data is not held
 *  (never yielded, or released), or a DLPack tensor owns it (the
 *  tensor's deleter releases it).
 *  Thread: the consumer; never blocks; O(hold). */
EACHOBS_API int eachobs_release(eachobs_iter *it, const void *data);

/** Inside getobs(): where field k of this observation goes (fields[k]
 *  bytes; field 0 is obs), or NULL when k is not a field (without
 *  eachobs_options.fields, only 0 is) or outside a getobs() eachobs runs.
 *  Thread: the one running getobs(). */
EACHOBS_API void *eachobs_field(size_t k);

/** Field k's array in data, a valid item of it (an observation, or a
 *  batch's data, which is field 0); entry j's lies j * fields[k] bytes in.
 *  NULL when it or data is NULL or k is not a field. Thread: any; O(1). */
EACHOBS_API void *eachobs_field_data(const eachobs_iter *it, const void *data,
				     size_t k);

/** Inside getobs(): this observation uses nbytes of its slot (with
 *  fields, of field 0), at most obs_size (fields[0]), as lengths and
 *  eachobs_obs_length() report; without a call, all; the last call wins.
 *  Bytes past it are stale: padding is getobs()'s to write. Returns 0;
 *  -EINVAL when nbytes exceeds the bound or outside a getobs() eachobs
 *  runs. Thread: the one running getobs(). */
EACHOBS_API int eachobs_set_length(size_t nbytes);

/** Set *len to the length (eachobs_set_length()) of obs, an observation
 *  of it still valid. Returns 0; -EINVAL when it, obs or len is NULL, or
 *  obs is not currently valid. Thread: the consumer; never blocks. */
EACHOBS_API int eachobs_obs_length(const eachobs_iter *it, const void *obs,
				   size_t *len);

/** Stop and free it (NULL: nothing happens), at any point. Then no thread
 *  starts another getobs(), also within a batch (each checks right before
 *  each one, so at most the one about to start may begin); close waits for
 *  those running, joins the threads (or gives them back to the pool) and
 *  frees the slots: it returns within about one getobs duration plus the
 *  joins, sooner when getobs() polls eachobs_cancelled(). No getobs() runs
 *  afterwards; yielded pointers are invalid but for items DLPack tensors
 *  own. Thread: the consumer; blocks until running getobs() calls end. */
EACHOBS_API void eachobs_close(eachobs_iter *it);

/** Make the consumer's blocked eachobs_next() / eachobs_next_batch() return
 *  -EINTR within a few milliseconds (one running a getobs() itself: when
 *  that returns), or else its next such call; interrupts before it give one
 *  -EINTR. Nothing is lost: a ready item comes with the next call; like
 *  any call, the -EINTR one gives back the previous item (hold 0). For
 *  Ctrl-C: it must stay open while this runs (a handler reaches it through
 *  a pointer cleared before eachobs_close()). Returns 0; -EINVAL when it is
 *  NULL. Thread: any, async-signal-safe (errno is kept); never blocks. */
EACHOBS_API int eachobs_interrupt(eachobs_iter *it);

/** What an iterator has done so far: is the loader or the training loop
 *  the bottleneck? Fields are only appended; an older library leaves those
 *  it does not count at 0. */
typedef struct eachobs_stats {
	/** Observations yielded (single, or in batches). */
	unsigned long long yielded;
	unsigned long long batches;  /**< batches eachobs_next_batch returned */
	unsigned long long skipped;  /**< failures skipped (on_error = SKIP) */
	unsigned long long loaded;   /**< getobs calls returned, any thread */
	/** Of those, on the consumer's thread (THREADED helping, SERIAL). */
	unsigned long long loaded_by_consumer;
	/** Time eachobs_next spent waiting for an observation. */
	unsigned long long consumer_wait_ns;
	/** Time eachobs_next spent inside getobs (THREADED helping, SERIAL). */
	unsigned long long consumer_getobs_ns;
	/** Summed over workers: time inside getobs. */
	unsigned long long worker_getobs_ns;
	/** Summed over workers: time waiting for room, a slot, the start, or
	 *  work to steal. */
	unsigned long long worker_idle_ns;
	/** Successful steals by idle workers (unordered). */
	unsigned long long steals;
	/** Most loaded units seen waiting when the consumer took one: in the
	 *  buffer (at most buffersize), or ordered, ahead in the window. */
	size_t max_waiting;
	unsigned nworkers; /**< worker threads started */
	/** Worker threads loading now (since 0.4): nworkers, or under
	 *  autotune those it lets load (the others sleep). */
	unsigned nloading;
	unsigned max_loading; /**< most threads that loaded at once */
	/** An eachobs_tune_reason: why nloading threads load. */
	unsigned tune_reason;
	/** Loaded units that may wait for the consumer now: buffersize, or
	 *  under autotune the depth it chose, 4 units a thread loading (2
	 *  batched; at least 16, or 2), deeper where loaders waited for room
	 *  while the consumer waited, at most buffersize. */
	size_t buffer_depth;
	/** The buffersize in force: the option, or its default (since 0.5). */
	size_t buffersize;
} eachobs_stats;

/** Why autotune lets as many threads load as it does. */
typedef enum eachobs_tune_reason {
	EACHOBS_TUNE_OFF = 0,     /**< not autotuned (or SERIAL) */
	EACHOBS_TUNE_STARTING,    /**< measuring: no decision yet */
	/** The consumer does not wait: the fewest that keep it fed. */
	EACHOBS_TUNE_CONSUMER_BOUND,
	/** getobs computes: no more than the CPUs (or where more stopped
	 *  paying). */
	EACHOBS_TUNE_CPU_BOUND,
	EACHOBS_TUNE_GROWING,     /**< getobs waits and more threads pay */
	EACHOBS_TUNE_PLATEAU,     /**< getobs waits; more stopped paying */
	/** The consumer waits with nthreads loading: a larger bound may
	 *  help, unless getobs computes. */
	EACHOBS_TUNE_AT_BOUND,
	/** The consumer waits while loaders wait for room, with the depth at
	 *  buffersize (ordered: a slow unit holds the window): a larger
	 *  buffersize may help (since 0.5). */
	EACHOBS_TUNE_MEMORY_BOUND,
} eachobs_tune_reason;

/** A static sentence, never NULL, for an eachobs_tune_reason (an unknown
 *  value gets a generic one). Thread: any. */
EACHOBS_API const char *eachobs_tune_reason_string(unsigned reason);

/** Write what it has done so far to st: exactly size bytes, 0 for the
 *  fields this library does not count. size is sizeof(eachobs_stats) in
 *  the caller's header, at least its 0.1 size (through nworkers, rounded
 *  up to its alignment). Worker figures may miss getobs() calls in
 *  progress.
 *  Returns 0; -EINVAL when it or st is NULL or size is below the 0.1 size
 *  (nothing written). Thread: the consumer; never blocks. */
EACHOBS_API int eachobs_get_stats_sized(const eachobs_iter *it,
					eachobs_stats *st, size_t size);

#ifdef EACHOBS_BUILDING
/* Inside the library: the exported entry point of 0.1.0, kept for binaries
 * built against that header, which passed no size (src/abi.c). */
EACHOBS_API int eachobs_get_stats(const eachobs_iter *it, eachobs_stats *st);
#else
/** eachobs_get_stats_sized() with this header's sizeof(eachobs_stats):
 *  0, or -EINVAL when it or st is NULL. Thread: the consumer. */
static inline int eachobs_get_stats(const eachobs_iter *it, eachobs_stats *st)
{
	return eachobs_get_stats_sized(it, st, sizeof(eachobs_stats));
}
#endif

/** The observations it skipped so far (EACHOBS_ON_ERROR_SKIP; 0 under STOP
 *  or for NULL it); out (NULL if max is 0) receives the first
 *  min(max, EACHOBS_FAILURES_KEPT) in the order the iteration passed them:
 *  unordered when eachobs_next() took one, ordered when every earlier
 *  position was yielded. Thread: the consumer; never blocks. */
EACHOBS_API size_t eachobs_failures(const eachobs_iter *it,
				    eachobs_failure *out, size_t max);

/** true inside a getobs() whose iterator is closing (the innermost, when
 *  getobs() iterates too); false elsewhere. A slow getobs() may poll it and
 *  return early, with any code: its result is discarded. Thread: any. */
EACHOBS_API bool eachobs_cancelled(void);

/** A seed for observation idx's own random numbers, so that what getobs()
 *  draws depends only on (seed, epoch, idx), not on thread, time or
 *  executor: a pure, well-mixed 64-bit hash (0 included), the same on every
 *  machine and version unless one says otherwise. Thread: any. */
EACHOBS_API unsigned long long eachobs_seed(unsigned long long seed,
					    unsigned long long epoch,
					    size_t idx);

/** A static message, never NULL, for code (0, 1 or a negative errno value):
 *  the library's wording for its codes, the system's for other errno
 *  values, a generic one otherwise. Thread: any. */
EACHOBS_API const char *eachobs_strerror(int code);

/** What the last failing eachobs call on this thread found wrong: the
 *  argument, its value and the limit ("nthreads 100000 exceeds
 *  EACHOBS_MAX_THREADS (1024)"), what could not be allocated or created, or
 *  which getobs() failed. Every negative return sets it (a getobs() code on
 *  the thread it is returned to, an eachobs_set_length() failure on the
 *  one running getobs()); success leaves it. Act on the code: the words may
 *  change. "" until a call fails; valid until the thread's next failing
 *  call or exit. Thread: any, each its own; eachobs_interrupt(NULL) sets a
 *  fixed message and stays async-signal-safe. */
EACHOBS_API const char *eachobs_last_error(void);

/** The running library's version, spelt as EACHOBS_VERSION_HEX: a program
 *  needing 0.4 checks eachobs_version() >= 0x000400. Thread: any. */
EACHOBS_API unsigned eachobs_version(void);

/** The running library's version, "major.minor.patch" (for example
 *  "0.2.0"): a static string, never NULL. Thread: any. */
EACHOBS_API const char *eachobs_version_string(void);

#ifdef __cplusplus
}
#endif

/* Datasets read front to back, in shards: eachobs_stream_parallel(). */
#include "eachobs_stream.h"

#endif /* EACHOBS_H */
