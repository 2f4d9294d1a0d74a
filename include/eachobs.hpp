/*
 * eachobs.hpp: a C++17 face for eachobs.h. Header-only; it links with the
 * same libeachobs and adds no thread, lock or allocation of its own to the
 * path that yields an item. eachobs.h stays the manual: what every call
 * means, when it blocks, what each option does. This header says only
 * what the C++ layer adds: ownership, exceptions, and which thread may
 * touch what.
 *
 *     eachobs::dataset images(10000, [](size_t idx, void *obs) {
 *             decode(idx, static_cast<float *>(obs));   // may throw
 *     });
 *     eachobs::loader loader(images, 784 * sizeof(float),
 *                            eachobs::options().nthreads(8));
 *     for (const eachobs::obs &o : loader)
 *             train_on(o.as<float>(), o.index);
 *     // the destructor closes: threads joined, slots freed
 *
 * Errors
 * ------
 * Every C call that returns < 0 becomes a thrown eachobs::error carrying
 * the code (code()) and eachobs_strerror()'s text. A getobs() failure is
 * an eachobs::getobs_error, which also carries the failed index(); a
 * blocked or next call answered with -EINTR after interrupt() is an
 * eachobs::interrupted (not sticky: iterating again goes on where it was).
 *
 * Exceptions thrown by getobs
 * ---------------------------
 * A C++ exception must never unwind through the library's C frames (on a
 * worker thread it would call std::terminate; under EACHOBS_SERIAL or
 * THREADED it would leave the C iterator half-way through a call). So
 * the getobs the library calls is a trampoline that catches everything,
 * on whichever thread loads: it keeps the std::exception_ptr with the
 * index it was thrown for (under a mutex, taken only when a getobs fails)
 * and returns eachobs::exception_code (-ECANCELED, which the library
 * itself never returns) as that getobs's failure. An int-returning get()
 * may return -ECANCELED too: what was kept tells the two apart (it threw
 * only where getobs_error::original() or failure::threw says so). The library then does
 * what on_error says: STOP ends the iteration, SKIP leaves the
 * observation out. Under STOP, the consumer's next() (or the range-for's
 * increment) then throws, on the consumer's thread:
 *
 *     std::throw_with_nested(eachobs::getobs_error(code, index, ...))
 *
 * so `catch (const eachobs::getobs_error &e)` sees index() and code(),
 * e.original() is the exception getobs threw, and
 * std::rethrow_if_nested(e) rethrows it with its own type. A getobs that
 * returns a negative int instead of throwing gives a plain getobs_error
 * (no nested exception, original() empty). Under SKIP, failures() lists
 * the skipped observations, each with its exception_ptr when it threw.
 * Nothing is rethrown on a worker, and the loader's destructor closes the
 * iterator as always, whether the exception left the loop or not.
 *
 * Threads and lifetime
 * --------------------
 * A loader is the C iterator: one consumer at a time calls next(), its
 * range-for, keep(), release(), checkpoint(), stats() and close();
 * interrupt() may come from any thread. getobs (the dataset's get()) runs
 * concurrently on worker threads, and under THREADED and SERIAL also on
 * the consumer's, inside next(). An item's pointers stay valid until the
 * next call of the consumer (hold = 0), or until it is released.
 */
#ifndef EACHOBS_HPP
#define EACHOBS_HPP

#include "eachobs.h"

#include <cerrno>
#include <cstddef>
#include <exception>
#include <iterator>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace eachobs {

/// What the getobs trampoline returns to the library when get() threw:
/// -ECANCELED, a code the library never returns of its own. Seen in
/// failures() and in getobs_error::code() for exceptions; a get() that
/// returns -ECANCELED itself is told apart by failure::threw and
/// getobs_error::original().
inline constexpr int exception_code = -ECANCELED;

/// A C call of eachobs returned code() < 0; what() is
/// eachobs_strerror(code()) or a sentence built on it. Any thread.
class error : public std::runtime_error {
public:
	/// The code's own message.
	explicit error(int code)
		: std::runtime_error(eachobs_strerror(code)), code_(code)
	{
	}
	/// A message of the caller's.
	error(int code, const std::string &what)
		: std::runtime_error(what), code_(code)
	{
	}
	/// The negative errno value the C call returned.
	int code() const noexcept { return code_; }

private:
	int code_;
};

/// interrupt() (or eachobs_interrupt()) answered a blocked or next call:
/// code() is -EINTR. Not sticky: nothing was lost, and iterating again
/// goes on where it was.
class interrupted : public error {
public:
	/// -EINTR.
	interrupted() : error(-EINTR, "eachobs: interrupted") {}
};

/// getobs failed for index(): it threw (original() holds the exception,
/// which is also nested: std::rethrow_if_nested) or returned code() < 0.
/// Sticky under STOP: every later next() throws it again.
class getobs_error : public error {
public:
	/// Built by the loader on the consumer's thread.
	getobs_error(int code, size_t index, std::exception_ptr original,
		     const std::string &what)
		: error(code, what), index_(index),
		  original_(std::move(original))
	{
	}
	/// The dataset index whose getobs failed.
	size_t index() const noexcept { return index_; }
	/// What getobs threw; empty when it returned a code instead.
	const std::exception_ptr &original() const noexcept
	{
		return original_;
	}

private:
	size_t index_;
	std::exception_ptr original_;
};

class pool;

/// Options without compound literals: every setter is named after the
/// eachobs_options field it sets (see eachobs.h for what 0 means) and
/// returns *this, so `eachobs::options().nthreads(8).ordered(true)`.
/// Copyable; vectors it is given are owned (shared by copies, and kept
/// by a loader started with them until it closes). Any thread; not
/// shared between threads while being set.
class options {
public:
	/// Every default (all-zero).
	options() = default;
	/// From a C struct, so C++20 designated initializers work:
	/// `eachobs::options(eachobs_options{ .nthreads = 8, .ordered = true })`.
	/// Its pointers are borrowed, as in C.
	options(const eachobs_options &o) : o_(o) {}

	/// eachobs_options.nthreads.
	options &nthreads(unsigned v) { return o_.nthreads = v, *this; }
	/// eachobs_options.basesize.
	options &basesize(size_t v) { return o_.basesize = v, *this; }
	/// eachobs_options.oversubscription.
	options &oversubscription(unsigned v)
	{
		return o_.oversubscription = v, *this;
	}
	/// eachobs_options.buffersize.
	options &buffersize(size_t v) { return o_.buffersize = v, *this; }
	/// eachobs_options.executor.
	options &executor(eachobs_executor v) { return o_.executor = v, *this; }
	/// eachobs_options.ordered.
	options &ordered(bool v = true) { return o_.ordered = v, *this; }
	/// eachobs_options.stack_size.
	options &stack_size(size_t v) { return o_.stack_size = v, *this; }
	/// eachobs_options.on_error.
	options &on_error(eachobs_on_error v) { return o_.on_error = v, *this; }
	/// eachobs_options.worker_cpus, owned.
	options &worker_cpus(std::vector<unsigned> cpus)
	{
		cpus_ = std::make_shared<const std::vector<unsigned>>(
			std::move(cpus));
		o_.worker_cpus = cpus_->data();
		o_.nworker_cpus = static_cast<unsigned>(cpus_->size());
		return *this;
	}
	/// eachobs_options.worker_nice.
	options &worker_nice(int v) { return o_.worker_nice = v, *this; }
	/// eachobs_options.batchsize: iterate with loader::batches().
	options &batchsize(size_t v) { return o_.batchsize = v, *this; }
	/// eachobs_options.drop_last.
	options &drop_last(bool v = true) { return o_.drop_last = v, *this; }
	/// eachobs_options.hold: items stay valid until released (keep()).
	options &hold(unsigned v) { return o_.hold = v, *this; }
	/// eachobs_options.pool; the pool must outlive the loader.
	options &pool(const eachobs::pool &p);
	/// eachobs_options.indices, owned: kept until the loader closes.
	options &indices(std::vector<size_t> idx)
	{
		indices_ = std::make_shared<const std::vector<size_t>>(
			std::move(idx));
		o_.indices = indices_->data();
		o_.nindices = indices_->size();
		return *this;
	}
	/// eachobs_options.indices, borrowed: valid until the loader closes.
	options &indices(const size_t *idx, size_t n)
	{
		indices_.reset();
		o_.indices = idx;
		o_.nindices = n;
		return *this;
	}
	/// eachobs_options.autotune: nthreads becomes the most that load.
	options &autotune(bool v = true) { return o_.autotune = v, *this; }
	/// eachobs_options.autotune_start.
	options &autotune_start(unsigned v)
	{
		return o_.autotune_start = v, *this;
	}
	/// eachobs_options.cycle_length (streams, ordered).
	options &cycle_length(unsigned v) { return o_.cycle_length = v, *this; }
	/// eachobs_options.shuffle_buffer (streams).
	options &shuffle_buffer(size_t v)
	{
		return o_.shuffle_buffer = v, *this;
	}
	/// eachobs_options.shuffle.
	options &shuffle(bool v = true) { return o_.shuffle = v, *this; }
	/// eachobs_options.seed.
	options &seed(unsigned long long v) { return o_.seed = v, *this; }
	/// eachobs_options.epoch.
	options &epoch(unsigned long long v) { return o_.epoch = v, *this; }
	/// eachobs_options.shard_index.
	options &shard_index(unsigned v) { return o_.shard_index = v, *this; }
	/// eachobs_options.shard_count.
	options &shard_count(unsigned v) { return o_.shard_count = v, *this; }
	/// eachobs_options.resume: bytes from loader::checkpoint(), owned
	/// (the library reads them at start only).
	options &resume(std::vector<unsigned char> bytes)
	{
		resume_ = std::make_shared<const std::vector<unsigned char>>(
			std::move(bytes));
		o_.resume = resume_->data();
		o_.resume_len = resume_->size();
		return *this;
	}

	/// eachobs_options.fields and nfields: the bytes of each field of an
	/// observation, summing to obs_size (the library copies them at
	/// start). An empty vector: one field of obs_size bytes.
	options &fields(std::vector<size_t> sizes)
	{
		fields_ = std::make_shared<const std::vector<size_t>>(
			std::move(sizes));
		o_.fields = fields_->empty() ? nullptr : fields_->data();
		o_.nfields = fields_->size();
		return *this;
	}

	/// The C struct, valid while this options object (or a copy) lives.
	const eachobs_options &c() const noexcept { return o_; }

private:
	friend class loader;
	eachobs_options o_{};
	std::shared_ptr<const std::vector<unsigned>> cpus_;
	std::shared_ptr<const std::vector<size_t>> indices_;
	std::shared_ptr<const std::vector<unsigned char>> resume_;
	std::shared_ptr<const std::vector<size_t>> fields_;
};

/// A set of persistent worker threads (eachobs_pool_create()); move-only.
/// The destructor destroys it, waiting for the loaders that use it to
/// close, so destroy it after them and not on one of their consumers.
class pool {
public:
	/// nthreads threads, started now; throws error on failure.
	explicit pool(unsigned nthreads)
	{
		int rc = eachobs_pool_create(&p_, nthreads);
		if (rc < 0)
			throw error(rc);
	}
	/// Takes over o's threads; o is left empty.
	pool(pool &&o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
	/// Destroys this pool's threads, then takes over o's.
	pool &operator=(pool &&o) noexcept
	{
		if (this != &o) {
			eachobs_pool_destroy(p_);
			p_ = std::exchange(o.p_, nullptr);
		}
		return *this;
	}
	pool(const pool &) = delete;
	pool &operator=(const pool &) = delete;
	/// eachobs_pool_destroy(): blocks until its loaders have closed.
	~pool() { eachobs_pool_destroy(p_); }
	/// The C pool, or NULL when moved from.
	eachobs_pool *get() const noexcept { return p_; }

private:
	eachobs_pool *p_ = nullptr;
};

inline options &options::pool(const eachobs::pool &p)
{
	o_.pool = p.get();
	return *this;
}

/// A dataset made of a count and a callable `fn(size_t idx, void *obs)`
/// that writes observation idx into obs and returns void (failure: throw)
/// or int (0, or a negative code). fn is called concurrently for distinct
/// indices, on worker threads; it must be thread-safe for them.
template <class F> class dataset {
public:
	/// n observations, loaded by fn (copied or moved in).
	dataset(size_t n, F fn) : n_(n), fn_(std::move(fn)) {}
	/// The number of observations.
	size_t size() const noexcept { return n_; }
	/// Calls fn; any thread the loader chooses.
	decltype(auto) get(size_t idx, void *obs) { return fn_(idx, obs); }

private:
	size_t n_;
	F fn_;
};

/// One observation from a loader: its bytes and its dataset index. Valid
/// until the consumer's next call on the loader (hold = 0) or until
/// released.
struct obs {
	const void *data = nullptr; ///< obs_size bytes, in the library's slot
	size_t index = 0;           ///< its dataset index
	/// data as a T (obs_size must hold one; slots are 64-byte aligned).
	template <class T> const T *as() const noexcept
	{
		return static_cast<const T *>(data);
	}
};

/// One batch: eachobs_batch's data, idx, count and lengths, valid as an
/// obs is.
struct batch : eachobs_batch {
	batch() noexcept : eachobs_batch() {}
	/// data as an array of count T (obs_size = sizeof(T); with fields,
	/// field 0's array, loader::field() gives each).
	template <class T> T *as() const noexcept
	{
		return static_cast<T *>(data);
	}
};

/// A skipped observation (on_error = SKIP), as eachobs_failures() keeps
/// it, with what its getobs threw when it threw.
struct failure {
	size_t index;                 ///< its dataset index
	int code;                     ///< the code; exception_code if it threw
	std::exception_ptr exception; ///< what it threw, when it did and was kept
	/// Whether get() threw (and that was kept; under SKIP, the first
	/// failure_log::max_skip_kept); false for a code it returned, also
	/// when that code is exception_code.
	bool threw = false;
};

namespace detail {

// What the trampoline keeps of failing getobs calls, for the consumer. The
// mutex is taken only on a failure. Under STOP every failure is kept (at
// most about one per loader thread: STOP is checked before each getobs);
// under SKIP only those with exception_code (an exception, or that code
// returned: the record tells which), the first max_skip_kept.
struct failure_log {
	static constexpr size_t max_skip_kept = 4 * EACHOBS_FAILURES_KEPT;

	std::mutex lock;
	std::vector<failure> kept;
	bool skip = false;

	// On the loading thread, inside the trampoline: never throws. e is
	// what get() threw, or null when it returned code.
	void note(size_t idx, int code, std::exception_ptr e) noexcept
	{
		try {
			std::lock_guard<std::mutex> g(lock);
			if (skip && (code != exception_code ||
				     kept.size() >= max_skip_kept))
				return;
			bool threw = e != nullptr;
			kept.push_back(failure{ idx, code, std::move(e), threw });
		} catch (...) {
			// Out of memory: the consumer still gets a
			// getobs_error, without the nested exception.
		}
	}

	// On the consumer's thread.
	bool find(size_t idx, int code, failure *out)
	{
		std::lock_guard<std::mutex> g(lock);
		for (const failure &f : kept) {
			if (f.index == idx && f.code == code) {
				*out = f;
				return true;
			}
		}
		return false;
	}
};

// What the C iterator's ctx points to: the dataset, its failures and what
// the options lent that must live until close. Shared with held<>
// handles, which read `it` to tell whether the iterator is still open.
struct state_base {
	virtual ~state_base() = default;
	eachobs_iter *it = nullptr;
	size_t n = 0;
	unsigned hold = 0;
	failure_log log;
	std::shared_ptr<const std::vector<size_t>> indices;
};

template <class D> struct state final : state_base {
	template <class A> explicit state(A &&a) : ds(std::forward<A>(a)) {}

	D ds; // the dataset, or a reference to the caller's

	static size_t numobs(void *ctx) noexcept
	{
		return static_cast<state *>(ctx)->n;
	}

	// The getobs the library calls: no exception leaves it.
	static int getobs(void *ctx, size_t idx, void *obs) noexcept
	{
		auto *s = static_cast<state *>(ctx);
		using R = decltype(s->ds.get(idx, obs));
		try {
			if constexpr (std::is_void_v<R>) {
				s->ds.get(idx, obs);
				return 0;
			} else {
				int rc = static_cast<int>(s->ds.get(idx, obs));
				if (rc < 0)
					s->log.note(idx, rc, nullptr);
				return rc;
			}
		} catch (...) {
			s->log.note(idx, exception_code,
				    std::current_exception());
			return exception_code;
		}
	}
};

template <class T, class = void> struct is_dataset : std::false_type {};
template <class T>
struct is_dataset<T, std::void_t<
	decltype(static_cast<size_t>(std::declval<T &>().size())),
	decltype(std::declval<T &>().get(size_t(), static_cast<void *>(nullptr)))>>
	: std::true_type {};

struct sentinel {};

// No dataset index: indices are below numobs(), a size_t.
inline constexpr size_t no_index = static_cast<size_t>(-1);

} // namespace detail

template <class Item> class held;
class loader;

/// The range-for iterator over a loader's observations (input iterator;
/// compares with the end sentinel). Consumer's thread only.
class obs_iterator {
public:
	using iterator_category = std::input_iterator_tag;
	using value_type = obs;
	using difference_type = std::ptrdiff_t;
	using pointer = const obs *;
	using reference = const obs &;

	/// The current observation.
	const obs &operator*() const noexcept { return cur_; }
	/// The current observation.
	const obs *operator->() const noexcept { return &cur_; }
	/// Gives the current observation back and takes the next: one call
	/// of eachobs_next(); throws as loader::next() does.
	inline obs_iterator &operator++();
	/// Whether the iteration has ended.
	friend bool operator==(const obs_iterator &i, detail::sentinel) noexcept
	{
		return i.l_ == nullptr;
	}
	/// Whether an observation is current.
	friend bool operator!=(const obs_iterator &i, detail::sentinel) noexcept
	{
		return i.l_ != nullptr;
	}

private:
	friend class loader;
	explicit obs_iterator(loader *l) noexcept;
	loader *l_;
	eachobs_iter *it_;
	obs cur_;
};

/// The range-for iterator over a loader's batches (see obs_iterator).
class batch_iterator {
public:
	using iterator_category = std::input_iterator_tag;
	using value_type = batch;
	using difference_type = std::ptrdiff_t;
	using pointer = const batch *;
	using reference = const batch &;

	/// The current batch.
	const batch &operator*() const noexcept { return cur_; }
	/// The current batch.
	const batch *operator->() const noexcept { return &cur_; }
	/// One call of eachobs_next_batch(); throws as loader::next() does.
	inline batch_iterator &operator++();
	/// Whether the iteration has ended.
	friend bool operator==(const batch_iterator &i,
			       detail::sentinel) noexcept
	{
		return i.l_ == nullptr;
	}
	/// Whether a batch is current.
	friend bool operator!=(const batch_iterator &i,
			       detail::sentinel) noexcept
	{
		return i.l_ != nullptr;
	}

private:
	friend class batch_range;
	explicit batch_iterator(loader *l) noexcept;
	loader *l_;
	eachobs_iter *it_;
	batch cur_;
};

/// `for (const eachobs::batch &b : loader.batches())`; valid while the
/// loader is neither moved nor destroyed.
class batch_range {
public:
	/// Takes the first (next) batch.
	inline batch_iterator begin();
	/// The end.
	detail::sentinel end() const noexcept { return {}; }

private:
	friend class loader;
	explicit batch_range(loader *l) noexcept : l_(l) {}
	loader *l_;
};

/// An open eachobs iterator (RAII): started by the constructor, closed by
/// the destructor or close(). Move-only; a moved-from loader is empty
/// (closed). One consumer at a time (see eachobs.h, Threading); only
/// interrupt() and get() may be called from other threads.
class loader {
public:
	/// An empty loader: next() throws error(-EINVAL).
	loader() noexcept = default;

	/// Start loading ds: any object with size() and get(idx, void *obs)
	/// (get returning void, or int: 0 or a negative code), such as a
	/// dataset. An lvalue is borrowed and must outlive the loader; an
	/// rvalue is moved into it. size() is called once, here; get()
	/// concurrently on the loading threads (see the file's comment for
	/// what happens when it throws). Throws error when
	/// eachobs_parallel() fails, and whatever size() throws.
	template <class D, std::enable_if_t<detail::is_dataset<
			std::remove_reference_t<D>>::value, int> = 0>
	loader(D &&ds, size_t obs_size, const options &opts = options())
	{
		using stored = std::conditional_t<std::is_lvalue_reference_v<D>,
						  D, std::decay_t<D>>;
		using S = detail::state<stored>;
		auto st = std::make_shared<S>(std::forward<D>(ds));
		st->n = static_cast<size_t>(st->ds.size());
		st->hold = opts.o_.hold;
		st->log.skip = opts.o_.on_error == EACHOBS_ON_ERROR_SKIP;
		st->indices = opts.indices_;

		eachobs_dataset data{};
		data.ctx = st.get();
		data.numobs = &S::numobs;
		data.getobs = &S::getobs;
		data.obs_size = obs_size;
		int rc = eachobs_parallel(&st->it, &data, &opts.o_);
		if (rc < 0)
			throw error(rc);
		it_ = st->it;
		st_ = std::move(st);
	}

	/// The same with a C struct, so that C++20 designated initializers
	/// (in declaration order) work: `eachobs::loader l(ds, sz,
	/// { .nthreads = 8, .ordered = true });`. For every default, leave
	/// the argument out: `{}` would fit both constructors.
	template <class D, std::enable_if_t<detail::is_dataset<
			std::remove_reference_t<D>>::value, int> = 0>
	loader(D &&ds, size_t obs_size, const eachobs_options &opts)
		: loader(std::forward<D>(ds), obs_size, options(opts))
	{
	}

	/// Takes over o's iterator; o is left empty. Iterators and ranges
	/// taken from o are invalid afterwards.
	loader(loader &&o) noexcept
		: it_(std::exchange(o.it_, nullptr)), st_(std::move(o.st_))
	{
	}
	/// Closes this loader's iterator, then takes over o's.
	loader &operator=(loader &&o) noexcept
	{
		if (this != &o) {
			close();
			it_ = std::exchange(o.it_, nullptr);
			st_ = std::move(o.st_);
		}
		return *this;
	}
	loader(const loader &) = delete;
	loader &operator=(const loader &) = delete;
	/// close().
	~loader() { close(); }

	/// eachobs_close(): no getobs runs once it returns, every thread is
	/// joined or given back to its pool; held<> handles become inert.
	/// Then empty. Blocks until running getobs calls end.
	void close() noexcept
	{
		eachobs_close(it_);
		it_ = nullptr;
		if (st_) {
			st_->it = nullptr;
			st_.reset();
		}
	}

	/// The next observation into o: true, or false at the end (o then
	/// unchanged). Throws getobs_error, interrupted, or error (-ENOBUFS
	/// with hold items held, -EINVAL when batched or empty). Blocks as
	/// eachobs_next().
	bool next(obs &o)
	{
		const void *data;
		size_t idx = detail::no_index;
		int rc = eachobs_next(it_, &data, &idx);
		if (rc == 1) {
			o.data = data;
			o.index = idx;
			return true;
		}
		if (rc < 0)
			fail(rc, idx == detail::no_index ? nullptr : &idx);
		return false;
	}
	/// The next batch into b (batchsize > 0), as next(obs &).
	bool next(batch &b)
	{
		int rc = eachobs_next_batch(it_, &b);
		if (rc == 1)
			return true;
		if (rc < 0)
			fail(rc, b.idx);
		return false;
	}

	/// Takes the first (next) observation: `for (const eachobs::obs &o :
	/// loader)`. Each step is one inline call of eachobs_next().
	obs_iterator begin() { return ++obs_iterator(this); }
	/// The end.
	detail::sentinel end() const noexcept { return {}; }
	/// The batches, for range-for (batchsize > 0).
	batch_range batches() noexcept { return batch_range(this); }

	/// eachobs_length(): items from start to end when nothing fails; 0
	/// when empty. Any thread while open; never blocks.
	size_t size() const noexcept { return eachobs_length(it_); }

	/// eachobs_interrupt(): the consumer's blocked or next call throws
	/// interrupted. Any thread, while the loader is neither closed nor
	/// moved; a signal handler should use get() kept in an atomic and
	/// eachobs_interrupt() (guide, Ctrl-C).
	void interrupt() noexcept { eachobs_interrupt(it_); }

	/// eachobs_checkpoint(): the bytes to give options::resume() for a
	/// loader that yields exactly the rest. Consumer's thread; never
	/// blocks. Throws error.
	std::vector<unsigned char> checkpoint()
	{
		size_t len = 0;
		int rc = eachobs_checkpoint(it_, nullptr, &len);
		if (rc != -ENOSPC)
			throw error(rc < 0 ? rc : -EINVAL);
		std::vector<unsigned char> bytes(len);
		rc = eachobs_checkpoint(it_, bytes.data(), &len);
		if (rc < 0)
			throw error(rc);
		bytes.resize(len);
		return bytes;
	}

	/// eachobs_release() of a held item (hold > 0). Throws error.
	void release(const void *data)
	{
		int rc = eachobs_release(it_, data);
		if (rc < 0)
			throw error(rc);
	}
	/// release(o.data).
	void release(const obs &o) { release(o.data); }
	/// release(b.data).
	void release(const batch &b) { release(b.data); }

	/// An RAII handle on a yielded item (hold > 0), released when the
	/// handle is destroyed or reset(). Throws error(-EINVAL) when hold
	/// is 0 or the loader is empty.
	template <class Item> held<Item> keep(const Item &item);

	/// eachobs_field_data(): the start of field k's array in a valid
	/// item (field 0 is the item's data), as a T: in a batch whose field
	/// k is one T, entry j's is field<T>(b, k)[j]. nullptr when k is not
	/// a field or the loader is empty. Any thread while open; O(1).
	template <class T = void>
	const T *field(const obs &o, size_t k) const noexcept
	{
		return static_cast<const T *>(eachobs_field_data(it_, o.data, k));
	}
	/// The same for a batch.
	template <class T = void>
	T *field(const batch &b, size_t k) const noexcept
	{
		return static_cast<T *>(eachobs_field_data(it_, b.data, k));
	}

	/// eachobs_obs_length() of a valid observation. Throws error.
	size_t length(const obs &o) const
	{
		size_t len = 0;
		int rc = eachobs_obs_length(it_, o.data, &len);
		if (rc < 0)
			throw error(rc);
		return len;
	}

	/// eachobs_get_stats(). Consumer's thread. Throws error when empty.
	eachobs_stats stats() const
	{
		eachobs_stats st{};
		int rc = eachobs_get_stats(it_, &st);
		if (rc < 0)
			throw error(rc);
		return st;
	}

	/// How many observations were skipped (on_error = SKIP).
	size_t skipped() const noexcept
	{
		return eachobs_failures(it_, nullptr, 0);
	}
	/// The first skipped observations (eachobs_failures()), each with the
	/// exception its getobs threw when it threw. Consumer's thread.
	std::vector<failure> failures() const
	{
		eachobs_failure f[EACHOBS_FAILURES_KEPT];
		size_t n = eachobs_failures(it_, f, EACHOBS_FAILURES_KEPT);
		std::vector<failure> out;
		for (size_t i = 0; i < n && i < EACHOBS_FAILURES_KEPT; i++) {
			failure x{ f[i].idx, f[i].code, nullptr };
			if (f[i].code == exception_code)
				st_->log.find(f[i].idx, f[i].code, &x);
			out.push_back(x);
		}
		return out;
	}

	/// The C iterator, or NULL when empty; owned by the loader. Any
	/// thread may read it while the loader is neither closed nor moved.
	eachobs_iter *get() const noexcept { return it_; }
	/// Whether the loader is open.
	explicit operator bool() const noexcept { return it_ != nullptr; }

private:
	friend class obs_iterator;
	friend class batch_iterator;

	// A next call returned rc < 0: throw what it means. idx points to the
	// failed index when getobs failed (eachobs_next() set it, or
	// batch.idx), else it is NULL. Cold and out of line: the loops' fast
	// path is the C call and a compare.
	[[noreturn, gnu::cold, gnu::noinline]] void fail(int rc,
							 const size_t *idx) const
	{
		if (!idx || !st_) {
			if (rc == -EINTR)
				throw interrupted();
			throw error(rc);
		}
		failure f{ 0, rc, nullptr };
		bool kept = st_->log.find(*idx, rc, &f);
		std::string what = "eachobs: getobs ";
		what += f.threw ? "threw" : "failed";
		what += " at index " + std::to_string(*idx) + ": ";
		if (!f.exception) {
			// Unkept only when memory ran out as it failed.
			what += !kept && rc == exception_code
				? "it threw, or returned exception_code "
				  "(which was not kept)"
				: eachobs_strerror(rc);
			throw getobs_error(rc, *idx, nullptr, what);
		}
		try {
			std::rethrow_exception(f.exception);
		} catch (const std::exception &e) {
			std::throw_with_nested(getobs_error(
				rc, *idx, f.exception, what + e.what()));
		} catch (...) {
			std::throw_with_nested(getobs_error(
				rc, *idx, f.exception,
				what + "an exception not derived from "
				       "std::exception"));
		}
	}

	eachobs_iter *it_ = nullptr;
	std::shared_ptr<detail::state_base> st_;
};

/// An item kept while hold > 0 (loader::keep()): move-only; released by
/// the destructor or reset(), on the consumer's thread. Once the loader
/// has closed, its items are gone and the handle releases nothing.
template <class Item> class held {
public:
	/// Holds nothing.
	held() noexcept = default;
	/// Takes over o's item.
	held(held &&o) noexcept
		: st_(std::move(o.st_)), item_(o.item_),
		  live_(std::exchange(o.live_, false))
	{
	}
	/// Releases this handle's item, then takes over o's.
	held &operator=(held &&o) noexcept
	{
		if (this != &o) {
			reset();
			st_ = std::move(o.st_);
			item_ = o.item_;
			live_ = std::exchange(o.live_, false);
		}
		return *this;
	}
	held(const held &) = delete;
	held &operator=(const held &) = delete;
	/// reset().
	~held() { reset(); }

	/// eachobs_release() of the item, if any and its loader is open.
	void reset() noexcept
	{
		if (live_ && st_->it)
			eachobs_release(st_->it, item_.data);
		live_ = false;
		st_.reset();
	}
	/// The item.
	const Item &operator*() const noexcept { return item_; }
	/// The item.
	const Item *operator->() const noexcept { return &item_; }
	/// Whether an item is held.
	explicit operator bool() const noexcept { return live_; }

private:
	friend class loader;
	held(std::shared_ptr<detail::state_base> st, const Item &item)
		: st_(std::move(st)), item_(item), live_(true)
	{
	}
	std::shared_ptr<detail::state_base> st_;
	Item item_{};
	bool live_ = false;
};

template <class Item> held<Item> loader::keep(const Item &item)
{
	static_assert(std::is_same_v<Item, obs> || std::is_same_v<Item, batch>,
		      "keep() takes an eachobs::obs or an eachobs::batch");
	if (!st_ || st_->hold == 0 || !item.data)
		throw error(-EINVAL, "eachobs: keep() needs hold > 0 and an "
				     "item of an open loader");
	return held<Item>(st_, item);
}

inline obs_iterator::obs_iterator(loader *l) noexcept
	: l_(l), it_(l->it_)
{
}

// Through locals, so that only they escape into the C call and the
// iterator's own fields stay in registers across the loop. idx starts as
// no_index: eachobs_next() sets it only for an item or a getobs failure.
inline obs_iterator &obs_iterator::operator++()
{
	const void *data;
	size_t idx = detail::no_index;
	int rc = eachobs_next(it_, &data, &idx);
	cur_.data = data;
	cur_.index = idx;
	if (rc != 1) {
		if (rc < 0)
			l_->fail(rc, idx == detail::no_index ? nullptr : &idx);
		l_ = nullptr;
	}
	return *this;
}

inline batch_iterator::batch_iterator(loader *l) noexcept
	: l_(l), it_(l->it_)
{
}

// Through a local, as obs_iterator's: only it escapes into the C call.
inline batch_iterator &batch_iterator::operator++()
{
	eachobs_batch b;
	int rc = eachobs_next_batch(it_, &b);
	static_cast<eachobs_batch &>(cur_) = b;
	if (rc != 1) {
		if (rc < 0)
			l_->fail(rc, b.idx);
		l_ = nullptr;
	}
	return *this;
}

inline batch_iterator batch_range::begin()
{
	return ++batch_iterator(l_);
}

/// eachobs_set_length() from inside get(): the bytes this observation
/// uses. Throws error(-EINVAL) outside get() or past obs_size.
inline void set_length(size_t nbytes)
{
	int rc = eachobs_set_length(nbytes);
	if (rc < 0)
		throw error(rc);
}

/// eachobs_field() from inside get(): where field k of this observation
/// goes, as a T (field 0 is get()'s obs); nullptr when k is not a field
/// or outside get().
template <class T = void> T *field(size_t k) noexcept
{
	return static_cast<T *>(eachobs_field(k));
}

/// eachobs_cancelled(): inside get(), whether its loader is closing.
inline bool cancelled() noexcept { return eachobs_cancelled(); }

/// eachobs_seed(): a seed for observation idx's own random numbers.
inline unsigned long long seed(unsigned long long seed,
			       unsigned long long epoch, size_t idx) noexcept
{
	return eachobs_seed(seed, epoch, idx);
}

} // namespace eachobs

#endif /* EACHOBS_HPP */
