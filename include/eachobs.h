/*
 * eachobs: load a dataset's observations in parallel, on threads, into
 * preallocated slots that the consumer reads in place.
 *
 * Overview
 * --------
 * A dataset is a small vtable (eachobs_dataset): numobs() says how many
 * observations there are, getobs() writes observation idx into a slot of
 * obs_size bytes that the library owns. eachobs_parallel() calls numobs()
 * once, allocates every slot it will ever use and starts the worker threads;
 * eachobs_next() yields one loaded observation at a time; eachobs_close()
 * stops the iteration at any point and frees everything.
 *
 *     eachobs_iter *it;
 *     int rc = eachobs_parallel(&it, &data, &(eachobs_options){ .nthreads = 8 });
 *     if (rc < 0) return rc;
 *     const void *obs; size_t idx;
 *     while ((rc = eachobs_next(it, &obs, &idx)) == 1)
 *             train_on(obs);
 *     eachobs_close(it);       // rc is 0 at the end, < 0 on error
 *
 * Ownership and lifetime
 * ----------------------
 * A slot is written exactly once per observation, by the thread that runs
 * getobs for it, and then read in place by the consumer: there is no copy
 * between getobs and the caller of eachobs_next(). The pointer that
 * eachobs_next() yields stays valid and its bytes stay unchanged until the
 * next eachobs_next() or eachobs_close() on the same iterator; after that the
 * library may hand the slot to another getobs call. Copy what must outlive
 * that.
 *
 * Memory is fixed at start: the iterator allocates
 * buffersize + workers + 1 slots (workers <= nthreads: no more threads
 * start than there are tasks) and nothing that grows with the number of
 * observations, so an iterator over 2^40 observations starts as fast as one
 * over ten. At most buffersize loaded observations wait in the hand-off
 * buffer; every worker holds at most one more (being loaded, or loaded and
 * waiting for room); the consumer holds at most one (yielded, or being
 * loaded by the consumer itself under EACHOBS_THREADED).
 *
 * Threading
 * ---------
 * Each iterator has exactly one consumer: eachobs_next() and eachobs_close()
 * on one iterator must not run concurrently, but they may be called from
 * different threads one after the other. Any number of iterators may exist
 * at once; they share nothing. getobs() is called concurrently from several
 * threads (for different indices), and with EACHOBS_THREADED also from the
 * consumer's thread, inside eachobs_next(). numobs() is called once, on the
 * thread that calls eachobs_parallel(). eachobs_interrupt() is the one
 * call any thread (or a signal handler) may make on an open iterator.
 * Worker threads, created or in a pool, block asynchronous signals
 * (SIGINT, SIGTERM, SIGCHLD, ...; not SIGSEGV, SIGBUS, SIGFPE, SIGILL,
 * SIGTRAP, SIGABRT, SIGSYS or SIGPROF), so the program's handlers run on
 * its own threads and a getobs() on a worker is not interrupted by them.
 *
 * Waiting
 * -------
 * No thread spins for long: a worker that finds the buffer full, and a
 * consumer that finds it empty, spin for a few microseconds and then sleep
 * on a futex. The consumer is woken by the first observation that is
 * ready; workers blocked on a full buffer are woken when half of it is free
 * again (or, with a buffer of less than two slots per worker, one per free
 * slot). A slow consumer leaves the workers asleep; a slow dataset leaves
 * the consumer asleep.
 *
 * Errors
 * ------
 * Every function that can fail returns 0 (or 1 for "an item") or a negative
 * errno value; nothing is reported through the global errno. Codes that
 * getobs() returns are passed through unchanged. eachobs_strerror() names
 * every code; eachobs_last_error() says what the last failing call on the
 * calling thread found wrong ("nthreads 100000 exceeds
 * EACHOBS_MAX_THREADS (1024)"), like errno set only on failure.
 *
 * Versions and compatibility
 * --------------------------
 * EACHOBS_VERSION_HEX is the header a program was compiled against,
 * eachobs_version() the library it runs with. The library is
 * libeachobs.so.0 throughout 0.x, and no 0.x release breaks a binary built
 * against an earlier 0.x header: before 1.0 the API only grows (new
 * functions, new codes, new fields), it never changes what a binary
 * already relies on.
 *
 * eachobs_options and eachobs_stats grow by fields appended at their end;
 * fields are never removed or reordered, and a new option's zero means
 * the behaviour from before it existed. Both travel with their size, as
 * struct open_how does to the kernel's openat2(): eachobs_parallel() and
 * eachobs_get_stats() are inline and pass sizeof the struct this header
 * declares to eachobs_parallel_sized() and eachobs_get_stats_sized().
 * So a newer library reads an older program's shorter options as if the
 * newer fields were zero, and writes only its shorter stats. An older
 * library running a newer program ignores nothing without a word: an
 * option it does not have must be zero, else start fails with -E2BIG, and
 * stats it does not count read 0; a function it does not have keeps the
 * program from loading. Binaries built against the 0.1 header, which
 * passed no size, keep calling the exported eachobs_parallel and
 * eachobs_get_stats of the library, which take the 0.1 sizes. Bindings
 * from other languages (ctypes, ccall) see those symbols, not the inline
 * wrappers: to reach options newer than 0.1 they call the _sized
 * functions with the size of their own struct.
 *
 * The layouts of eachobs_dataset, eachobs_batch and eachobs_failure are
 * frozen: they do not change in any 0.x release.
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
/** The minor version of this header: it grows with every release that adds
 *  to the API. */
#define EACHOBS_VERSION_MINOR 2
/** The patch version of this header: fixes only. */
#define EACHOBS_VERSION_PATCH 0
/**
 * This header's version as one number, (major << 16) | (minor << 8) |
 * patch: 0.2.0 is 0x000200. Compare it with eachobs_version(), the
 * version of the library the program runs with.
 */
#define EACHOBS_VERSION_HEX                                                 \
	((EACHOBS_VERSION_MAJOR << 16) | (EACHOBS_VERSION_MINOR << 8) |     \
	 EACHOBS_VERSION_PATCH)

/**
 * A dataset: what the library needs to load observation idx.
 *
 * The library never copies or frees ctx; it must stay valid until
 * eachobs_close() returns.
 */
typedef struct eachobs_dataset {
	/** Passed to both callbacks. */
	void *ctx;
	/**
	 * The number of observations. Called exactly once, inside
	 * eachobs_parallel(), on the caller's thread. Required.
	 */
	size_t (*numobs)(void *ctx);
	/**
	 * Write observation idx into obs, which points to obs_size bytes owned by
	 * the library (aligned to 64 bytes; NULL-free even when obs_size is 0;
	 * inside a batch, obs is the observation's place obs_size bytes after
	 * the previous one, so it is only as aligned as obs_size allows).
	 * Called exactly once for every position of the iteration order: by
	 * default every idx in [0, n) once; with a sampler (indices, shards)
	 * once per visit, so an index listed twice is loaded twice. Calls stop
	 * early on close or error. Calls for different indices run concurrently on
	 * different threads, so getobs must be thread-safe for distinct indices.
	 * Return 0 on success or a negative code; the first failure (in
	 * iteration order when ordered) is reported by eachobs_next() with its
	 * index. A
	 * positive return value breaks this contract and is reported as -ERANGE.
	 * Required.
	 */
	int (*getobs)(void *ctx, size_t idx, void *obs);
	/** Bytes of one observation slot; 0 is allowed (index-only datasets). */
	size_t obs_size;
} eachobs_dataset;

/** Who runs getobs(). */
typedef enum eachobs_executor {
	/**
	 * Worker threads, and the consumer helps: an eachobs_next() that finds
	 * nothing ready runs a pending getobs() itself instead of sleeping (like
	 * Julia's ThreadedEx). Best when the consumer has nothing else to do.
	 * The consumer counts as a loader: with a CPU-bound getobs, nthreads =
	 * CPUs - 1 keeps the busy threads at the number of cores (the image
	 * pipeline measured about 6% faster so).
	 */
	EACHOBS_THREADED = 0,
	/**
	 * Worker threads only: the consumer's thread never runs getobs(), so the
	 * training thread stays free (DataLoaders.jl's useprimary=false).
	 */
	EACHOBS_BACKGROUND,
	/**
	 * No threads: getobs() runs inside eachobs_next(), in iteration order
	 * (increasing index order, or the sampler's: see `ordered`), in one
	 * slot (hold slots with hold; for debugging, like PyTorch's
	 * num_workers=0). nthreads (beyond the EACHOBS_MAX_THREADS check every
	 * executor makes), basesize, oversubscription, buffersize,
	 * stack_size, worker_cpus, worker_nice, pool and ordered are ignored;
	 * hold still applies.
	 */
	EACHOBS_SERIAL,
} eachobs_executor;

/** What a failing getobs() does to the iteration. */
typedef enum eachobs_on_error {
	/**
	 * Stop: eachobs_next() returns the failure's code (in ordered mode
	 * after every earlier position of the iteration order) and keeps
	 * returning it. The default.
	 */
	EACHOBS_ON_ERROR_STOP = 0,
	/**
	 * Skip: the observation is left out and the iteration goes on (one
	 * corrupt sample does not end a multi-day run). Ordered output stays
	 * ordered. eachobs_failures() counts the skipped observations and
	 * keeps the first EACHOBS_FAILURES_KEPT with their codes.
	 */
	EACHOBS_ON_ERROR_SKIP,
} eachobs_on_error;

/** A set of persistent worker threads that iterators borrow; opaque. */
typedef struct eachobs_pool eachobs_pool;

/**
 * Where the buffers that getobs() writes into, and that eachobs_next() /
 * eachobs_next_batch() yield, come from (eachobs_options.allocator): pinned
 * memory for asynchronous copies to a GPU (cudaHostAlloc, or
 * cudaHostRegister on blocks of your own), huge pages, NUMA-local memory,
 * memory shared with another process (memfd and mmap). Bookkeeping keeps
 * using the library's own allocation.
 *
 * alloc is called only inside eachobs_parallel(), on its thread; it
 * returns size bytes aligned to align (a power of two, 64 or more), or
 * NULL, which fails eachobs_parallel() with -ENOMEM (a misaligned block,
 * -EINVAL); every block it returned is given back with free(ctx, ptr,
 * size), the same size, once: in eachobs_close(), or when start fails, or
 * later, when the last DLPack tensor made from the iterator's items is
 * deleted (eachobs_dlpack.h). So the functions and ctx must stay valid
 * until then. free may run on any thread that closes an iterator or
 * deletes such a tensor.
 */
typedef struct eachobs_allocator {
	void *(*alloc)(void *ctx, size_t size, size_t align); /**< NULL: failure */
	void (*free)(void *ctx, void *ptr, size_t size);      /**< required */
	void *ctx; /**< passed to both */
} eachobs_allocator;

/**
 * Options. All-zero (or a NULL pointer) means every default; use designated
 * initializers: `eachobs_options o = { .nthreads = 8, .ordered = true };`
 * New fields are only ever appended, and their zero keeps the behaviour
 * from before them (see Versions and compatibility, above).
 */
typedef struct eachobs_options {
	/**
	 * Worker threads. 0: the number of CPUs this process may run on,
	 * not the machine's: the calling thread's CPU affinity (taskset,
	 * numactl, Slurm's --cpus-per-task, an MPI launcher's binding), and
	 * no more than a cgroup v2 CPU quota allows, rounded up (docker
	 * --cpus, Kubernetes CPU limits, systemd's CPUQuota); at least 1.
	 * Counted at every start (a quota read less than a second before
	 * may be reused); with a pool, 0 means the pool's size instead. At
	 * most EACHOBS_MAX_THREADS. Fewer are started when there are fewer
	 * tasks than threads.
	 */
	unsigned nthreads;
	/**
	 * Observations per task: the unit in which work is split among the
	 * workers and stolen. 0: derived,
	 * ceil(n / (oversubscription * nthreads)). Unordered, worker j
	 * starts with the j-th run of whole tasks and idle workers steal half
	 * of the busiest worker's remaining tasks; a worker takes the indices
	 * of its own deque one at a time (runs of up to 16 while getobs is
	 * cheap, under 2 us), so none is kept from a thief for long. In
	 * ordered mode a worker claims at most
	 * max(1, buffersize / (2 * nthreads)) indices at a time so that the
	 * reorder window stays full (see `ordered`).
	 */
	size_t basesize;
	/**
	 * Tasks per thread when basesize is 0. 0: the default,
	 * EACHOBS_DEFAULT_OVERSUBSCRIPTION (8, as FoldsThreads.jl suggests:
	 * enough tasks that a slow one does not leave the others idle).
	 */
	unsigned oversubscription;
	/**
	 * Loaded observations (batches, when batched) that may wait for the
	 * consumer. 0: the default, the largest of
	 * EACHOBS_DEFAULT_BUFFER_MIN, EACHOBS_DEFAULT_BUFFER_PER_THREAD *
	 * nthreads, and as many as fit EACHOBS_DEFAULT_BUFFER_BYTES (at most
	 * EACHOBS_DEFAULT_BUFFER_MAX); batched, the same with
	 * EACHOBS_DEFAULT_BATCH_BUFFER_MIN and
	 * EACHOBS_DEFAULT_BATCH_BUFFER_PER_THREAD, counting batches and
	 * their bytes (large batches stay at 2 per thread). Memory used
	 * for slots is (buffersize + nthreads + 1) * obs_size, rounded up to
	 * 64 bytes each. Why the byte rule: with cheap getobs calls the
	 * buffer's size sets how often loaders and consumer sleep and wake
	 * (each wake-up a futex call): no-op getobs, 8-byte observations,
	 * P = 2, BACKGROUND, items/s: buffersize 16: 1.0 M, 64: 2.8 M,
	 * 256: 7.0 M; 256 slots of 8 bytes cost 16 KiB.
	 * Why 4 per thread: with a buffer smaller than the number of threads,
	 * loaders wait for the consumer to wake up; measured on 2 cores,
	 * TimeDataset n = 10000, t = 10 us, 16 threads, BACKGROUND, median of
	 * 7, unordered: buffersize 1: 280 ms, 8: 122 ms, 16: 78 ms,
	 * 64: 76 ms, 256: 89 ms; ordered: 1: 204 ms, 16: 124 ms, 32: 86 ms,
	 * 64: 87 ms, 256: 83 ms. Below 2 per thread the loaders also lose
	 * the wake-up hysteresis (see Waiting, above).
	 */
	size_t buffersize;
	/** Who runs getobs(); EACHOBS_THREADED by default. */
	eachobs_executor executor;
	/**
	 * Yield in iteration order: increasing index order by default, the
	 * sampler's order with indices, shuffle or shards (positions below).
	 * Workers then take positions from one shared counter in order
	 * instead of stealing ranges, and the buffersize + workers + 1 slots
	 * form a reorder window: position i may be loaded once position
	 * i - (buffersize + workers + 1) has been released by the consumer,
	 * so memory stays bounded and the position the consumer waits for is
	 * always being loaded. A slow observation holds up the window
	 * behind it; with many more threads than cores, raise buffersize
	 * (eachobs_get_stats: max_waiting at the window size).
	 *
	 * Unordered (false, the default), the order in which observations
	 * come out depends on thread timing and changes from run to run, so
	 * a run with a fixed seed is reproducible only with ordered = true
	 * (or EACHOBS_SERIAL). Which observations a pass visits, the batch
	 * each belongs to, and their bytes when getobs() draws from
	 * eachobs_seed(), do not depend on it.
	 */
	bool ordered;
	/**
	 * Stack size of each worker thread, in bytes. 0: the default,
	 * EACHOBS_DEFAULT_STACK_SIZE (2 MiB, as Rust's threads use). Not the
	 * system's 8 MiB because creating a thread with an 8 MiB stack took
	 * ~90 us here against ~25 us at 2 MiB, and that time is paid before
	 * the first item.
	 * Raise it if getobs needs deep recursion or large arrays on the
	 * stack; below PTHREAD_STACK_MIN is -EINVAL.
	 */
	size_t stack_size;
	/** What a failing getobs() does; EACHOBS_ON_ERROR_STOP by default. */
	eachobs_on_error on_error;
	/**
	 * Keeping the workers off the training thread's core. An in-process
	 * loader competes with the training thread for cores (Meta's SPDL
	 * measured training at half speed until the loader was kept off the
	 * trainer's core); use these with EACHOBS_BACKGROUND when the consumer
	 * thread does heavy work of its own.
	 *
	 * worker_cpus: NULL, or nworker_cpus CPU numbers the worker threads
	 * may run on (for example every CPU but the one the training thread
	 * is pinned to), created or borrowed from a pool (see pool). Each
	 * must be below EACHOBS_MAX_CPU; a list none of whose CPUs the
	 * system lets the process use gives -EAGAIN at start.
	 * nworker_cpus = 0 means no restriction (borrowed threads: the
	 * pool's CPUs).
	 */
	const unsigned *worker_cpus;
	/** The number of entries in worker_cpus; 0: no restriction. */
	unsigned nworker_cpus;
	/**
	 * 0: workers run at the caller's scheduling priority (borrowed
	 * threads: the pool's). 1..19: workers, created or borrowed, run at
	 * this nice value, so that when they and the training thread both
	 * want a core the training thread wins, while idle cores still go to
	 * the workers. Other values: -EINVAL.
	 */
	int worker_nice;
	/**
	 * 0: single observations, through eachobs_next(). > 0: batches of
	 * this many observations, through eachobs_next_batch(). Batch k holds
	 * the observations at positions [k * batchsize, (k + 1) * batchsize)
	 * of the iteration order, in that order, obs_size bytes apart in one
	 * contiguous buffer; each getobs() writes straight into its place
	 * there (no copy after getobs). Unordered, whole batches are yielded
	 * as they complete; ordered, in order. A batch is the unit of
	 * buffersize, hold and memory: the iterator allocates
	 * buffersize + workers + max(1, hold) batch buffers. Workers that
	 * have no batch of their own left help fill the others', so a few
	 * large batches still keep every thread busy, and nthreads is not
	 * capped by the number of batches. basesize stays in observations
	 * (rounded up to whole batches). At most EACHOBS_MAX_BATCHSIZE.
	 */
	size_t batchsize;
	/**
	 * Drop what does not divide evenly. With batchsize > 0: a final
	 * batch smaller than batchsize (its observations are never loaded).
	 * With shard_count > 1: the order is truncated to a multiple of
	 * shard_count instead of padded (see shard_index); batches are then
	 * cut from the shard.
	 */
	bool drop_last;
	/**
	 * 0: what eachobs_next() / eachobs_next_batch() yields is valid until
	 * the next such call or eachobs_close(). K > 0: up to K yielded items
	 * (observations, or batches) stay valid, unchanged, until
	 * eachobs_release() gives each back, in any order; the next call with
	 * K held returns -ENOBUFS (and iteration goes on once one is
	 * released). Memory becomes buffersize + workers + K items. In ordered
	 * mode a held item does not hold up the reorder window: the iterator
	 * swaps in one of K spare buffers as it yields (no copy). At most
	 * EACHOBS_MAX_SLOTS. A getobs() that itself returns -ENOBUFS is
	 * passed through like any code (and sticks): a caller whose getobs
	 * can return it tells the two apart by releasing an item and calling
	 * again.
	 */
	unsigned hold;
	/**
	 * NULL: the iterator creates its worker threads and joins them at
	 * close. Else a pool (eachobs_pool_create()) whose idle threads the
	 * iterator borrows as workers and gives back at close, so epoch after
	 * epoch starts without creating threads. nthreads 0 then means the
	 * pool's size. When fewer threads are idle than the iterator has
	 * workers (another iterator holds them), it creates its own for the
	 * rest instead of waiting, so iterators sharing a pool never wait for
	 * each other. Borrowed threads keep the pool's stack size (the
	 * default; stack_size applies to threads the iterator creates), and
	 * take on worker_cpus and worker_nice while lent, before their first
	 * getobs: an iterator without them gets the pool's own CPUs and nice
	 * value, those of the thread that created the pool. A thread is lent
	 * to one iterator at a time, so iterators with different placements
	 * share a pool (training kept off the trainer's core, validation
	 * anywhere) without undoing each other's. Raising a nice value is
	 * free but lowering it needs CAP_SYS_NICE (or RLIMIT_NICE): without
	 * it, a pool thread that ran at nice N stays at N and is lent only
	 * to iterators that ask for N or more; the others create threads for
	 * the difference. Give the iterators on one pool the same
	 * worker_nice, or use a pool per nice value. The pool must outlive
	 * the iterator.
	 */
	eachobs_pool *pool;
	/**
	 * Samplers, shuffling and shards. The "order" is the sequence of
	 * dataset indices one pass visits: indices[0 .. nindices) when
	 * indices is set, else 0 .. n-1; call its length L. shuffle permutes
	 * the order, then sharding keeps one shard of it. Whatever the
	 * sampler, eachobs_next() yields the dataset index in *idx, and
	 * `ordered` means in this order (after shuffling and sharding), not
	 * in increasing index order.
	 *
	 * indices: NULL means the order 0 .. n-1. Otherwise the dataset
	 * indices to visit, in this order; repeats are allowed (each visit is
	 * its own getobs call). The array is not copied and must stay valid
	 * and unchanged until eachobs_close() returns. An entry >= n gives
	 * -EINVAL at start (checked in O(nindices)); NULL with nindices > 0
	 * gives -EINVAL.
	 */
	const size_t *indices;
	/** Entries in indices; 0 with indices set: an empty order. */
	size_t nindices;
	/**
	 * false: visit the order as it is. true: visit a permutation of it
	 * that depends only on (the order, seed, epoch): the same on every
	 * machine, for every nthreads and executor; different from epoch to
	 * epoch. It needs no memory that grows with L (a keyed bijection of
	 * [0, L) computed per position), so L may be 2^40 or more. The
	 * order observations are yielded in follows it only with `ordered`.
	 */
	bool shuffle;
	/** Shuffle key; 0 is a seed like any other. Ignored unless shuffle. */
	unsigned long long seed;
	/**
	 * The pass number: bump it each epoch for a fresh permutation with
	 * the same seed. 0 is an epoch like any other. Ignored unless
	 * shuffle.
	 */
	unsigned long long epoch;
	/**
	 * The shard this iteration visits; 0: the first (and, with
	 * shard_count 0 or 1, the only one).
	 *
	 * Shards for distributed training, as PyTorch's DistributedSampler
	 * makes them: with shard_count > 1 the (shuffled) order is dealt out
	 * to shard_count shards of equal length, shard s taking positions
	 * s, s + shard_count, s + 2 * shard_count, ..., and this iteration
	 * visits shard shard_index only. Every shard has ceil(L / shard_count)
	 * positions: the order is padded by wrapping around to its start
	 * (repeatedly when L < shard_count; L = 0 gives empty shards). With
	 * drop_last it is truncated instead, and every shard has
	 * floor(L / shard_count). Shards are disjoint apart from the padding;
	 * under shuffle they change from epoch to epoch. shard_index >=
	 * shard_count gives -EINVAL when shard_count > 1; otherwise it is
	 * ignored.
	 */
	unsigned shard_index;
	/** Shards in all; 0 or 1: no sharding. */
	unsigned shard_count;
	/**
	 * Resume an iteration from a checkpoint: NULL, or resume_len bytes
	 * that eachobs_checkpoint() wrote (since 0.2). The iterator then
	 * yields every item of the iteration that was not yielded before the
	 * checkpoint, each exactly once, and none that was; ordered, in
	 * order. The dataset must have the same numobs and the options the
	 * same sampler and batching (indices contents, shuffle and, when
	 * shuffling, seed and epoch, shard_index and shard_count when
	 * sharding, batchsize, drop_last); executor, nthreads, basesize,
	 * oversubscription, buffersize, hold, pool, ordered, on_error and
	 * placement may differ. Anything else (other sizes or options,
	 * truncated or damaged bytes) is -EINVAL at start, with nothing
	 * started. The bytes are read during eachobs_parallel() only.
	 */
	const void *resume;
	/** Bytes at resume; 0 when resume is NULL (else -EINVAL). */
	size_t resume_len;
	/**
	 * NULL: the library allocates the item buffers itself. Else where
	 * they come from (see eachobs_allocator; since 0.2); the struct is
	 * copied, its functions and ctx must outlive every block. alloc or
	 * free NULL: -EINVAL.
	 */
	const eachobs_allocator *allocator;
} eachobs_options;

/** CPU numbers in eachobs_options.worker_cpus must be below this. */
#define EACHOBS_MAX_CPU 1024u

/** Upper bound on eachobs_options.nthreads. */
#define EACHOBS_MAX_THREADS 1024u
/** Upper bound on buffersize + nthreads + 1. */
#define EACHOBS_MAX_SLOTS (1u << 24)
/** Default tasks per thread when basesize is derived. */
#define EACHOBS_DEFAULT_OVERSUBSCRIPTION 8u
/** Default buffersize: at least this many ... */
#define EACHOBS_DEFAULT_BUFFER_MIN 16u
/** ... and this many per worker thread ... */
#define EACHOBS_DEFAULT_BUFFER_PER_THREAD 4u
/** ... and, for small observations, as many as fit this many bytes ... */
#define EACHOBS_DEFAULT_BUFFER_BYTES ((size_t)256 << 10)
/** ... up to this many. */
#define EACHOBS_DEFAULT_BUFFER_MAX 256u
/**
 * Default buffersize with batches: at least this many batches ... (a batch
 * of 64 images of 224 x 224 x 3 floats is 38 MB, so the unbatched default
 * of 4 per thread would cost gigabytes; 2 per worker is PyTorch's
 * prefetch_factor and still leaves the loaders half a buffer of slack).
 */
#define EACHOBS_DEFAULT_BATCH_BUFFER_MIN 2u
/** ... and this many per worker thread. */
#define EACHOBS_DEFAULT_BATCH_BUFFER_PER_THREAD 2u
/** Upper bound on eachobs_options.batchsize. */
#define EACHOBS_MAX_BATCHSIZE ((size_t)1 << 31)

/** Failures eachobs_failures() keeps (the first ones, in yield order). */
#define EACHOBS_FAILURES_KEPT 16u

/** A getobs() failure that was skipped. */
typedef struct eachobs_failure {
	size_t idx; /**< the observation's index */
	int code;   /**< what its getobs() returned (-ERANGE if positive) */
} eachobs_failure;

/** Default worker stack size (see eachobs_options.stack_size). */
#define EACHOBS_DEFAULT_STACK_SIZE ((size_t)2 << 20)

/** An iterator; opaque. */
typedef struct eachobs_iter eachobs_iter;

/**
 * Create a pool of nthreads persistent worker threads, asleep until an
 * iterator borrows them (eachobs_options.pool).
 *
 * The threads start on the calling thread's CPUs (its affinity) at its
 * nice value: the pool's own placement, which they take on again for
 * iterators without worker_cpus or worker_nice.
 *
 * @param pool      receives the pool; NULL on failure.
 * @param nthreads  1 .. EACHOBS_MAX_THREADS.
 * @return 0; -EINVAL when pool is NULL or nthreads is 0 or above
 *   EACHOBS_MAX_THREADS; -ENOMEM; -EAGAIN when a thread cannot be created
 *   (the ones started are joined, nothing is left allocated).
 *
 * Thread: any. Blocks only to create threads.
 */
EACHOBS_API int eachobs_pool_create(eachobs_pool **pool, unsigned nthreads);

/**
 * Stop and free a pool. Waits until every iterator that uses it has been
 * closed, then joins its threads.
 *
 * @param pool  the pool, or NULL (then nothing happens).
 *
 * Thread: any thread that is not the consumer of an open iterator on this
 * pool (it would wait for itself). Blocks until those iterators close.
 */
EACHOBS_API void eachobs_pool_destroy(eachobs_pool *pool);

/**
 * Start loading a dataset, with options of a stated size.
 *
 * Most programs call eachobs_parallel(), which passes
 * sizeof(eachobs_options) as this header declares it. The size lets a
 * library newer or older than the header tell which options the caller
 * knows (see Versions and compatibility, above): fields beyond opts_size
 * are taken as zero, their default; fields of a newer header that this
 * library does not know must be zero.
 *
 * Validates the arguments, calls data->numobs() once, allocates every slot
 * and starts the worker threads (none for EACHOBS_SERIAL, none when n is 0).
 * *data and *opts are copied; data->ctx must stay valid until
 * eachobs_close(), and so must opts->indices and opts->pool
 * (opts->worker_cpus is read at start only).
 *
 * @param it         receives the iterator; set to NULL on failure.
 * @param data       the dataset; numobs and getobs are required.
 * @param opts       options, or NULL for every default (then opts_size is
 *                   ignored).
 * @param opts_size  the size of *opts in bytes: sizeof(eachobs_options) as
 *                   the caller's header declares it; at least its size in
 *                   0.1.0 (up to and including shard_count).
 * @return 0 on success;
 *   -EINVAL when it, data, data->numobs or data->getobs is NULL, opts is
 *           not NULL and opts_size is smaller than eachobs_options was in
 *           0.1.0, the executor or on_error is out of range, nthreads
 *           exceeds EACHOBS_MAX_THREADS,
 *           stack_size is non-zero and below PTHREAD_STACK_MIN,
 *           worker_nice is outside 0..19, a worker_cpus entry is not below
 *           EACHOBS_MAX_CPU or worker_cpus is NULL with nworker_cpus > 0,
 *           batchsize exceeds EACHOBS_MAX_BATCHSIZE, hold exceeds
 *           EACHOBS_MAX_SLOTS, an indices entry is not below n, indices
 *           is NULL with nindices > 0, shard_index >= shard_count > 1,
 *           or the slot count or slot memory would overflow
 *           (buffersize + nthreads + max(1, hold) > EACHOBS_MAX_SLOTS);
 *   -E2BIG  when opts_size is larger than this library's
 *           eachobs_options and a byte past its end is not zero: the
 *           program asks for an option that this (older) library does
 *           not have, and rather than ignore it the library starts
 *           nothing;
 *   -ENOMEM when an allocation fails;
 *   -EAGAIN when a thread cannot be created (resource limits, or a
 *           stack_size the system cannot provide), or the system lets
 *           the process use none of worker_cpus (on created and
 *           borrowed threads alike).
 *   On failure no getobs() has run (numobs() may have, except for -E2BIG
 *   and the opts_size -EINVAL, which are found before anything is
 *   called), every thread that was started has been joined and nothing is
 *   left allocated.
 *
 * Thread: any. Blocks only to create threads.
 */
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
/**
 * Start loading a dataset: eachobs_parallel_sized() with opts_size =
 * sizeof(eachobs_options), the options as this header declares them.
 * Inline, so that the size compiled into the program is the one its
 * header gave it.
 *
 * @param it    receives the iterator; set to NULL on failure.
 * @param data  the dataset; numobs and getobs are required.
 * @param opts  options, or NULL for every default.
 * @return 0 on success, or an error of eachobs_parallel_sized(): -EINVAL
 *   for an invalid argument or option, -E2BIG when the program sets an
 *   option that the library it runs with is too old to have, -ENOMEM,
 *   -EAGAIN. On failure no getobs() has run and nothing is left
 *   allocated.
 *
 * Thread: any. Blocks only to create threads.
 */
static inline int eachobs_parallel(eachobs_iter **it,
				   const eachobs_dataset *data,
				   const eachobs_options *opts)
{
	return eachobs_parallel_sized(it, data, opts, sizeof(eachobs_options));
}
#endif

/**
 * Yield the next loaded observation.
 *
 * Gives up the observation yielded by the previous call (its slot may be
 * reused from now on), then waits until an observation is ready: any one when
 * unordered, the next in iteration order when ordered. Under
 * EACHOBS_THREADED a call that finds nothing ready loads a pending
 * observation itself; under SERIAL every call loads one.
 *
 * @param it   the iterator.
 * @param obs  receives a pointer to the observation's obs_size bytes, valid
 *             and unchanged until the next eachobs_next() or
 *             eachobs_close(); NULL on end or error. May be NULL.
 * @param idx  receives the observation's index; on a getobs failure, the
 *             index that failed; untouched at the end. May be NULL.
 * @return 1 when an observation was yielded;
 *   0 once every observation has been yielded, and on every later call;
 *   c < 0, the code a getobs() returned, after that getobs failed (in
 *     ordered mode, only after every lower index was yielded); every later
 *     call returns c again, with *idx set to the same index (under
 *     EACHOBS_ON_ERROR_SKIP failures are skipped instead: see
 *     eachobs_failures());
 *   -ERANGE when a getobs() returned a positive value (a contract breach);
 *   -EINTR after eachobs_interrupt() (not sticky: call again to go on);
 *   -ENOBUFS when hold observations are held (not sticky: release one
 *     and call again);
 *   -EINVAL when it is NULL or the iterator is batched (batchsize > 0:
 *     use eachobs_next_batch()).
 *
 * Thread: the iterator's one consumer at a time. Blocks (sleeping) until an
 * observation is ready or eachobs_interrupt() is called.
 */
EACHOBS_API int eachobs_next(eachobs_iter *it, const void **obs, size_t *idx);

/** A batch of observations (eachobs_options.batchsize > 0). */
typedef struct eachobs_batch {
	/** count observations, obs_size bytes apart, contiguous; aligned to
	 *  64 bytes. Valid as eachobs_next()'s observations are (see hold). */
	void *data;
	/** Their dataset indices, in batch order. */
	const size_t *idx;
	/** batchsize, or fewer for a last partial batch (or when observations
	 *  were skipped: EACHOBS_ON_ERROR_SKIP). */
	size_t count;
	/** Bytes getobs() wrote for each (eachobs_set_length()); obs_size
	 *  unless it said otherwise. The bytes of observation j's place past
	 *  lengths[j] are stale: whatever an earlier observation left in
	 *  that memory (or never written), not zeros. */
	const size_t *lengths;
} eachobs_batch;

/**
 * Yield the next batch (eachobs_options.batchsize > 0).
 *
 * Works like eachobs_next(): gives up the previous batch (unless hold > 0),
 * then waits until a batch is complete: any one when unordered, the next
 * when ordered. Under EACHOBS_THREADED the caller helps load while it
 * would otherwise wait. The observations were written by getobs() in
 * place: batch->data is read where they were loaded.
 *
 * When the consumer waits for a batch and getobs() is slow (microseconds
 * or more), the threads fill one batch together, one observation each at
 * a time, so the first batch is ready after about ceil(batchsize / P)
 * getobs durations with P loaders (ordered: the batch needed next comes
 * first).
 *
 * A failing getobs() fails the batch it belongs to: in ordered mode after
 * every earlier batch was yielded. Under EACHOBS_ON_ERROR_STOP no further
 * getobs() starts for that batch, or for any batch that would come after
 * it (unordered: for any batch), so *batch->idx is the index of a failed
 * observation of it, not necessarily its first. Under EACHOBS_ON_ERROR_SKIP the failed
 * observations are left out instead: the rest of the batch moves down over
 * them (the only case where the library moves observation bytes) and count
 * shrinks; a batch whose every observation failed is skipped.
 *
 * @param it     the iterator.
 * @param batch  receives the batch. At the end and on errors: data and
 *               lengths NULL, count 0, and idx NULL, except on a getobs()
 *               failure, where idx points to the one failed index.
 * @return 1 when a batch was yielded; 0 once every batch has been yielded
 *   (also with batches held); c < 0, a getobs() failure's code, sticky as
 *   in eachobs_next(); -EINTR after eachobs_interrupt() (not sticky);
 *   -ENOBUFS when hold batches are held (not sticky: release one and call
 *   again); -EINVAL when it or batch is NULL or the iterator is not
 *   batched.
 *
 * Thread: the iterator's one consumer. Blocks (sleeping) until a batch is
 * complete or eachobs_interrupt() is called.
 */
EACHOBS_API int eachobs_next_batch(eachobs_iter *it, eachobs_batch *batch);

/**
 * How many items this iterator yields from its start to its end when no
 * getobs() fails: observations for eachobs_next(), batches (after
 * drop_last) for eachobs_next_batch(); for a resumed iterator
 * (eachobs_options.resume), what the checkpoint left. The steps of an
 * epoch, for learning-rate schedules and progress bars, known before the
 * first item.
 *
 * @param it  the iterator; NULL gives 0.
 * @return the count.
 *
 * Thread: any, at any time while the iterator is open. O(1), never blocks.
 */
EACHOBS_API size_t eachobs_length(const eachobs_iter *it);

/** Upper bound on eachobs_checkpoint()'s bytes: 72 + 16 per span (see
 *  there); with default options and up to 64 threads at most this. */
#define EACHOBS_CHECKPOINT_MAX_DEFAULT ((size_t)64 << 10)

/**
 * Write a checkpoint: which items this iterator has yielded so far, so
 * that a new iterator given these bytes in eachobs_options.resume yields
 * exactly the rest.
 *
 * Every item eachobs_next() / eachobs_next_batch() returned before this
 * call counts as yielded, held or not; items skipped under
 * EACHOBS_ON_ERROR_SKIP count as yielded; a failed item under STOP does
 * not (a resumed iterator retries it). Call it at any point between calls
 * of the consumer: before the first item, mid-way, after the end (the
 * resume then yields nothing), after an error, on a resumed iterator (its
 * checkpoint covers what was yielded before the resume too). Iteration
 * goes on normally afterwards. It reads only the consumer's own record,
 * so it never waits for getobs() calls in progress.
 *
 * The bytes are a plain, self-checking record (no pointers; for processes
 * on the same machine): 72 bytes plus 16 for each run of consecutive
 * yielded items. Ordered and SERIAL that is one run; unordered, work
 * stealing leaves at most workers + slots + 1 runs, whatever the number
 * of observations, so with default options and up to 64 threads the
 * record stays below EACHOBS_CHECKPOINT_MAX_DEFAULT (a few KiB). A resumed
 * iterator's record can add as much again per resume.
 *
 * @param it   the iterator.
 * @param buf  where to write; may be NULL when *len is 0.
 * @param len  on entry the room at buf; on return the bytes written, or
 *             with -ENOSPC the bytes needed.
 * @return 0; -ENOSPC when the room is too small (*len says how much is
 *   needed; nothing else changes); -EINVAL when it or len is NULL, or buf
 *   is NULL with *len > 0; -ENOMEM when the record could not grow earlier.
 *
 * Thread: the iterator's consumer, between its calls. Never blocks.
 */
EACHOBS_API int eachobs_checkpoint(eachobs_iter *it, void *buf, size_t *len);

/**
 * Give back an item yielded while eachobs_options.hold > 0.
 *
 * @param it    the iterator.
 * @param data  the observation pointer eachobs_next() yielded, or the
 *              batch's data pointer; items may be released in any order.
 * @return 0; -EINVAL when it or data is NULL, hold is 0, or data is not a
 *   held item (never yielded, or released already). The item's memory may
 *   be reused from then on.
 *
 * Thread: the iterator's consumer. Never blocks. O(hold).
 */
EACHOBS_API int eachobs_release(eachobs_iter *it, const void *data);

/**
 * Inside getobs(): say how many bytes of the obs_size slot this
 * observation really uses, for variable-length observations (token
 * sequences, records). obs_size is then the maximum. The consumer reads it
 * from eachobs_batch.lengths or eachobs_obs_length(). Without a call the
 * length is obs_size; the last call wins. The library writes nothing past
 * nbytes: the rest of the slot holds stale bytes of an earlier
 * observation (or was never written), so a consumer that needs padding
 * must have getobs() write it.
 *
 * @param nbytes  at most the dataset's obs_size.
 * @return 0; -EINVAL when nbytes > obs_size or when not called from inside
 *   a getobs() that eachobs runs.
 *
 * Thread: the thread running getobs(). Never blocks.
 */
EACHOBS_API int eachobs_set_length(size_t nbytes);

/**
 * The length (eachobs_set_length()) of an observation eachobs_next()
 * yielded and that is still valid.
 *
 * @return 0 with *len set; -EINVAL when it, obs or len is NULL, or obs is
 *   not a currently valid observation of it.
 *
 * Thread: the iterator's consumer. Never blocks.
 */
EACHOBS_API int eachobs_obs_length(const eachobs_iter *it, const void *obs,
				   size_t *len);

/**
 * Stop and free an iterator.
 *
 * Works at any point: before anything was consumed, mid-way, after the end,
 * after an error, after eachobs_interrupt(). Close tells every thread to
 * start no new getobs() — no new index, and no further observation of a
 * batch being filled; each thread checks right before every getobs(), so
 * at most the one it was about to start can still begin — waits for the
 * getobs() calls in progress, joins
 * every thread (or gives it back to its pool) and frees every slot. So it
 * returns within about one getobs duration plus the joins, whatever the
 * batchsize, executor, ordering, hold or pool. A getobs() that polls
 * eachobs_cancelled() lets it return sooner. No getobs() runs after it
 * returns. Pointers yielded by eachobs_next() are invalid afterwards.
 *
 * @param it  the iterator, or NULL (then nothing happens).
 *
 * Thread: the iterator's consumer. Blocks until running getobs() calls end.
 */
EACHOBS_API void eachobs_close(eachobs_iter *it);

/**
 * Make the consumer's blocked eachobs_next() / eachobs_next_batch() return
 * -EINTR, or, when none is blocked, the next such call.
 *
 * For Ctrl-C: a SIGINT handler may call it (eachobs_close() may not run in
 * a handler). The blocked call returns within a few milliseconds; under
 * EACHOBS_THREADED or SERIAL, a call that is running a getobs() itself
 * returns -EINTR once that getobs() returns. Several interrupts before the
 * consumer's next call are answered by one -EINTR. Nothing is lost: an
 * item that was ready is yielded by the call after the -EINTR, and the
 * iteration goes on where it was (a program may ask "really quit?"); or
 * eachobs_close(), which is prompt as always. -EINTR is not sticky. Like
 * any call, the -EINTR call gives back the item the previous call yielded
 * (hold = 0).
 *
 * The iterator must stay open while this runs: a handler reaches it
 * through a pointer the program clears before eachobs_close() (worker
 * threads block asynchronous signals, so a handler runs only on the
 * program's own threads; see the guide's Ctrl-C recipe).
 *
 * @param it  the iterator.
 * @return 0; -EINVAL when it is NULL.
 *
 * Thread: any, and async-signal-safe (atomic operations and a futex
 * wake-up; errno is preserved). Never blocks.
 */
EACHOBS_API int eachobs_interrupt(eachobs_iter *it);

/**
 * What an iterator has done so far, to tell where time goes: is the
 * loader the bottleneck, or the training loop?
 *
 * Reading it: the time the training loop lost to loading, against the
 * elapsed time, says whether the loader keeps up ("3%: it keeps up";
 * 40%: add threads or make getobs cheaper). Under EACHOBS_BACKGROUND
 * that time is consumer_wait_ns. Under EACHOBS_THREADED it is
 * consumer_wait_ns + consumer_getobs_ns: a consumer that finds nothing
 * ready loads instead of waiting, so consumer_wait_ns stays near zero by
 * construction and says nothing alone. worker_idle_ns against nworkers
 * times the elapsed time says how much loading capacity sat unused, mostly
 * because the buffer was full (the consumer is the bottleneck: fewer
 * threads would do) or, at the end, for want of work. max_waiting near
 * buffersize also means the consumer is the bottleneck.
 *
 * Costs: two clock reads per getobs, or per run of up to 16 cheap ones
 * (under 2 us each), and one per wait that sleeps.
 *
 * New fields are only ever appended; a library older than the header
 * leaves the ones it does not count at 0 (see Versions and
 * compatibility, above).
 */
typedef struct eachobs_stats {
	/** Observations yielded (single, or in batches). */
	unsigned long long yielded;
	unsigned long long batches;  /**< batches eachobs_next_batch returned */
	unsigned long long skipped;  /**< failures skipped (on_error = SKIP) */
	unsigned long long loaded;   /**< getobs calls that returned, any thread */
	/** Of those, on the consumer's thread (THREADED helping, SERIAL). */
	unsigned long long loaded_by_consumer;
	/** Time eachobs_next spent waiting for an observation (spinning or
	 *  asleep). */
	unsigned long long consumer_wait_ns;
	/** Time eachobs_next spent inside getobs (THREADED helping, SERIAL). */
	unsigned long long consumer_getobs_ns;
	/** Summed over workers: time inside getobs. */
	unsigned long long worker_getobs_ns;
	/** Summed over workers: time waiting for room in the buffer, for a
	 *  slot, for the start, or looking for work to steal. */
	unsigned long long worker_idle_ns;
	/** Successful steals by idle workers (unordered). */
	unsigned long long steals;
	/** The most loaded observations seen waiting for the consumer when it
	 *  took one (unordered: in the buffer; ordered: loaded or being
	 *  loaded ahead of it in the reorder window, at most
	 *  buffersize + nthreads). */
	size_t max_waiting;
	unsigned nworkers; /**< worker threads started */
} eachobs_stats;

/**
 * Fill the caller's stats, of a stated size, with what the iterator has
 * done so far.
 *
 * Most programs call eachobs_get_stats(), which passes
 * sizeof(eachobs_stats) as this header declares it. Exactly size bytes at
 * st are written, never one more: this library's figures, and 0 for the
 * fields of a newer header that it does not count.
 *
 * Worker figures are read while the workers run: each is exact for what
 * has finished and may miss the getobs calls in progress (a run of cheap
 * ones counts when the whole run has).
 *
 * @param it    the iterator.
 * @param st    receives the figures; size bytes.
 * @param size  sizeof(eachobs_stats) as the caller's header declares it;
 *              at least its size in 0.1.0 (up to and including nworkers,
 *              rounded up to the struct's alignment).
 * @return 0; -EINVAL when it or st is NULL or size is smaller than
 *   eachobs_stats was in 0.1.0 (then nothing is written).
 *
 * Thread: the iterator's consumer (like eachobs_next). Never blocks.
 */
EACHOBS_API int eachobs_get_stats_sized(const eachobs_iter *it,
					eachobs_stats *st, size_t size);

#ifdef EACHOBS_BUILDING
/* Inside the library: the exported entry point of 0.1.0, kept for binaries
 * built against that header, which passed no size (src/abi.c). */
EACHOBS_API int eachobs_get_stats(const eachobs_iter *it, eachobs_stats *st);
#else
/**
 * Fill *st with what the iterator has done so far:
 * eachobs_get_stats_sized() with size = sizeof(eachobs_stats) as this
 * header declares it.
 *
 * @param it  the iterator.
 * @param st  receives the figures.
 * @return 0, or -EINVAL when it or st is NULL.
 *
 * Thread: the iterator's consumer (like eachobs_next). Never blocks.
 */
static inline int eachobs_get_stats(const eachobs_iter *it, eachobs_stats *st)
{
	return eachobs_get_stats_sized(it, st, sizeof(eachobs_stats));
}
#endif

/**
 * The failures skipped so far (eachobs_options.on_error =
 * EACHOBS_ON_ERROR_SKIP).
 *
 * A failure counts once the iteration has passed it: unordered, when
 * eachobs_next() took it instead of an observation; ordered, when every
 * earlier position was yielded.
 *
 * @param it   the iterator; NULL gives 0.
 * @param out  receives the first min(max, EACHOBS_FAILURES_KEPT) failures,
 *             in the order the iteration passed them; may be NULL if max
 *             is 0.
 * @param max  room in out.
 * @return how many observations were skipped in all (0 under
 *   EACHOBS_ON_ERROR_STOP, where the failure is eachobs_next()'s return).
 *
 * Thread: the iterator's consumer (like eachobs_next). Never blocks.
 */
EACHOBS_API size_t eachobs_failures(const eachobs_iter *it,
				    eachobs_failure *out, size_t max);

/**
 * Whether the iterator whose getobs() is running on the calling thread is
 * being closed.
 *
 * A getobs() that can take long (a slow disk, a network fetch, seconds of
 * decoding) may poll this and return early, with any code: once close has
 * begun, its result is discarded. eachobs_close() waits for running getobs
 * calls, so polling is what lets it return promptly instead of after the
 * slowest one.
 *
 * @return true inside a getobs() whose iterator is closing; false inside
 *   any other getobs() and outside getobs(). Inside a getobs() that itself
 *   iterates another eachobs iterator, it answers for the innermost one
 *   whose getobs() is running on this thread.
 *
 * Thread: any; never blocks (a thread-local load and an atomic load).
 */
EACHOBS_API bool eachobs_cancelled(void);

/**
 * A seed for observation idx's own random numbers (augmentation), so that
 * what getobs() draws depends only on (seed, epoch, idx), never on which
 * thread loads idx, when, or under which executor.
 *
 * A pure, well-mixed 64-bit hash: every output bit flips with probability
 * about 1/2 when any input bit flips, so neighbouring indices and epochs get
 * unrelated seeds. The same inputs give the same value on every machine and
 * in every version that does not say otherwise. A getobs() typically seeds
 * its generator with eachobs_seed(seed, epoch, idx), using the seed and
 * epoch it was given in eachobs_options.
 *
 * @param seed   the run's seed.
 * @param epoch  the pass number.
 * @param idx    the dataset index being loaded.
 * @return the seed; any 64-bit value, 0 included.
 *
 * Thread: any; never blocks (a few multiplications).
 */
EACHOBS_API unsigned long long eachobs_seed(unsigned long long seed,
					    unsigned long long epoch,
					    size_t idx);

/**
 * A readable message for a code returned by this library or passed through
 * from getobs().
 *
 * @param code  0, 1, or a negative errno value.
 * @return a static string, never NULL: the library's own wording for the
 *   codes it returns, the system's description for other negative errno
 *   values (a getobs that returned -EBADMSG reads "Bad message"), and a
 *   generic message for anything else.
 *
 * Thread: any; never blocks.
 */
EACHOBS_API const char *eachobs_strerror(int code);

/**
 * What the last failing eachobs call on this thread found wrong, in words:
 * the argument as the program writes it, its value and the limit it broke
 * ("nthreads 100000 exceeds EACHOBS_MAX_THREADS (1024)",
 * "eachobs_next: the iterator is batched (batchsize 64): use
 * eachobs_next_batch"), what could not be allocated or created, or which
 * getobs() failed ("eachobs_next: getobs(17) failed: Bad message (-74)").
 *
 * Every call of this API that returns a negative code sets it, also for
 * codes passed through from getobs(). Like errno, a call that succeeds
 * leaves it unchanged: read it right after the call that failed, and test
 * the returned code, not the message, to learn whether a call failed. The
 * code is the part to act on; the wording is for people and may change
 * between releases.
 *
 * @return the message, never NULL: "" until a call fails on this thread.
 *   The string belongs to the library; it stays valid and unchanged until
 *   the next failing eachobs call on this thread, or the thread's exit.
 *   Copy it to keep it longer.
 *
 * Thread: any. Each thread has its own message, set only by the calls it
 * makes: a getobs() failure is set on the thread whose eachobs_next() or
 * eachobs_next_batch() returns it, not on the worker that ran getobs(); an
 * eachobs_set_length() that fails sets it on the thread running that
 * getobs(). Never blocks. eachobs_interrupt(NULL) in a signal handler
 * sets a fixed message, without formatting, and stays async-signal-safe.
 */
EACHOBS_API const char *eachobs_last_error(void);

/**
 * The version of the library the program is running with, spelt as
 * EACHOBS_VERSION_HEX spells the header's.
 *
 * It may differ from EACHOBS_VERSION_HEX, the header the program was
 * compiled against: see Versions and compatibility, above. A program
 * that wants a feature added in 0.3 checks `eachobs_version() >= 0x000300`
 * before using it.
 *
 * @return (major << 16) | (minor << 8) | patch of the running library.
 *
 * Thread: any; never blocks.
 */
EACHOBS_API unsigned eachobs_version(void);

/**
 * The version of the library the program is running with, as text.
 *
 * @return a static string, "major.minor.patch" (for example "0.2.0"),
 *   never NULL.
 *
 * Thread: any; never blocks.
 */
EACHOBS_API const char *eachobs_version_string(void);

#ifdef __cplusplus
}
#endif

#endif /* EACHOBS_H */
