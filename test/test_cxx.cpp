// eachobs.hpp, the C++ face: range-for over observations and batches for
// every executor, ordered and not; exceptions thrown by getobs reach the
// consumer's loop with their index and type and never cross the C frames;
// an exception in the loop body closes the loader; move semantics; hold;
// checkpoint and resume; interrupt; pools; options. Built with -std=c++17
// -Wall -Wextra -Werror -pedantic, so it also checks that both headers
// compile so.
#include "eachobs.hpp"

#include <criterion/criterion.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <mutex>
#include <sched.h>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

namespace {

const eachobs_executor executors[] = { EACHOBS_THREADED, EACHOBS_BACKGROUND,
				       EACHOBS_SERIAL };

const char *name(eachobs_executor ex)
{
	return ex == EACHOBS_THREADED	? "THREADED"
	       : ex == EACHOBS_BACKGROUND ? "BACKGROUND"
					  : "SERIAL";
}

// Aborts the test's process with a message if it still runs after the
// deadline: Criterion's own .timeout does not fire under --jobs 2. A
// deadline timer, not synchronization: the test never waits for it. The
// suite's .fini stops and joins it (it runs after a failed assertion
// too), so that no thread is left over at exit.
struct watchdog {
	std::mutex lock;
	std::condition_variable cv;
	bool done = false;
	std::thread *thread = nullptr;
};
watchdog wd;

void deadline()
{
	wd.thread = new std::thread([] {
		std::unique_lock<std::mutex> g(wd.lock);
		if (wd.cv.wait_for(g, std::chrono::seconds(60),
				   [] { return wd.done; }))
			return;
		std::fprintf(stderr, "\n*** watchdog: %s::%s still running "
				     "after 60 s. Aborting. ***\n",
			     criterion_current_suite->name,
			     criterion_current_test->name);
		std::abort();
	});
}

// In the ASan build, a leak fails the test: LeakSanitizer's report at the
// exit of Criterion's child process is printed but would not fail it
// (Criterion reports a test over its protocol, not by exit status).
void finish()
{
	{
		std::lock_guard<std::mutex> g(wd.lock);
		wd.done = true;
	}
	wd.cv.notify_all();
	wd.thread->join();
	delete wd.thread;
#if defined(__SANITIZE_ADDRESS__)
	cr_assert_eq(__lsan_do_recoverable_leak_check(), 0,
		     "LeakSanitizer found leaks (see above)");
#endif
}

// Threads of this process: entries of /proc/self/task.
int threads_now()
{
	DIR *d = opendir("/proc/self/task");
	int n = 0;
	if (!d)
		return -1;
	while (dirent *e = readdir(d))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

// A joined thread may stay listed for a moment while the kernel reaps
// it: wait up to 5 s for the count to drop to want.
int threads_settle(int want)
{
	auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
	int n;
	while ((n = threads_now()) > want &&
	       std::chrono::steady_clock::now() < end)
		sched_yield();
	return n;
}

// A dataset object with size() and get(): writes idx into the slot and
// counts the calls for each index. get() runs on the library's threads,
// where Criterion's assertions must not be used: it only records.
struct counted {
	explicit counted(size_t n) : calls(n) {}
	size_t size() const { return calls.size(); }
	void get(size_t idx, void *obs)
	{
		calls[idx]++;
		total++;
		*static_cast<size_t *>(obs) = idx;
	}
	bool each_once() const
	{
		return std::all_of(calls.begin(), calls.end(),
				   [](const std::atomic<unsigned> &c) {
					   return c == 1;
				   });
	}
	std::vector<std::atomic<unsigned>> calls;
	std::atomic<long> total{ 0 };
};

// What a getobs throws in the tests: its own type, with its own data.
struct bad_sample : std::runtime_error {
	explicit bad_sample(size_t i)
		: std::runtime_error("bad sample " + std::to_string(i)), idx(i)
	{
	}
	size_t idx;
};

// The consumer's record: every index yielded once, in order if ordered.
struct seen {
	explicit seen(size_t n) : count(n) {}
	void add(size_t idx, const void *data)
	{
		cr_assert_lt(idx, count.size());
		cr_assert_eq(*static_cast<const size_t *>(data), idx,
			     "slot of %zu holds another index", idx);
		if (in_order)
			cr_assert_eq(idx, last + 1, "%zu after %zu", idx, last);
		last = idx;
		count[idx]++;
		total++;
	}
	void all_once(const char *what) const
	{
		for (size_t i = 0; i < count.size(); i++)
			cr_assert_eq(count[i], 1u, "%s: index %zu yielded %u "
				     "times", what, i, count[i]);
	}
	std::vector<unsigned> count;
	size_t last = static_cast<size_t>(-1);
	size_t total = 0;
	bool in_order = false;
};

eachobs::options opts(eachobs_executor ex, bool ordered)
{
	return eachobs::options().nthreads(3).executor(ex).ordered(ordered);
}

} // namespace

TestSuite(cxx, .init = deadline, .fini = finish, .timeout = 120);

Test(cxx, range_for_yields_every_index_once_for_every_executor)
{
	const size_t n = 2000;
	for (eachobs_executor ex : executors) {
		for (bool ordered : { false, true }) {
			counted data(n);
			seen s(n);
			s.in_order = ordered || ex == EACHOBS_SERIAL;
			eachobs::loader loader(data, sizeof(size_t),
					       opts(ex, ordered));
			cr_assert_eq(loader.size(), n);
			for (const eachobs::obs &o : loader)
				s.add(o.index, o.data);
			s.all_once(name(ex));
			cr_assert(data.each_once(), "%s ordered %d", name(ex),
				  ordered);
			// At the end it stays at the end.
			cr_assert(loader.begin() == loader.end());
		}
	}
}

Test(cxx, range_for_over_batches_yields_every_index_once)
{
	const size_t n = 1000, bs = 7; // 142 batches of 7 and one of 6
	for (eachobs_executor ex : executors) {
		for (bool ordered : { false, true }) {
			counted data(n);
			seen s(n);
			eachobs::loader loader(data, sizeof(size_t),
					       opts(ex, ordered).batchsize(bs));
			cr_assert_eq(loader.size(), (n + bs - 1) / bs);
			size_t batches = 0, prev_first = 0;
			for (const eachobs::batch &b : loader.batches()) {
				cr_assert(b.count == bs ||
					  (b.count == n % bs &&
					   b.idx[0] == n - n % bs));
				if ((ordered || ex == EACHOBS_SERIAL) &&
				    batches > 0)
					cr_assert_eq(b.idx[0], prev_first + bs);
				prev_first = b.idx[0];
				for (size_t j = 0; j < b.count; j++) {
					cr_assert_eq(b.lengths[j],
						     sizeof(size_t));
					s.add(b.idx[j], b.as<size_t>() + j);
				}
				batches++;
			}
			cr_assert_eq(batches, (n + bs - 1) / bs);
			s.all_once(name(ex));
		}
	}
}

Test(cxx, next_returns_false_at_the_end_and_stays_there)
{
	counted data(5);
	eachobs::loader loader(data, sizeof(size_t));
	eachobs::obs o;
	size_t k = 0;
	while (loader.next(o))
		k++;
	cr_assert_eq(k, 5);
	cr_assert_not(loader.next(o));
}

// The heart of the wrapper: for every executor, ordered or not, single
// or batched, a getobs that throws on one index makes the loop throw
// getobs_error with that index, nesting the original exception with its
// type and data; the process goes on and the loader closes cleanly.
Test(cxx, a_throwing_getobs_reaches_the_loop_with_its_index_and_type)
{
	const size_t n = 500, bad = 321;
	for (eachobs_executor ex : executors) {
		for (bool ordered : { false, true }) {
			for (size_t bs : { size_t(0), size_t(16) }) {
				eachobs::dataset data(n, [&](size_t idx,
							     void *obs) {
					if (idx == bad)
						throw bad_sample(idx);
					*static_cast<size_t *>(obs) = idx;
				});
				seen s(n);
				bool caught = false;
				int before = threads_now();
				try {
					eachobs::loader loader(
						data, sizeof(size_t),
						opts(ex, ordered).batchsize(bs));
					if (bs)
						for (const eachobs::batch &b :
						     loader.batches())
							for (size_t j = 0;
							     j < b.count; j++)
								s.add(b.idx[j],
								      b.as<size_t>() + j);
					else
						for (const eachobs::obs &o :
						     loader)
							s.add(o.index, o.data);
				} catch (const eachobs::getobs_error &e) {
					caught = true;
					cr_assert_eq(e.index(), bad);
					cr_assert_eq(e.code(),
						     eachobs::exception_code);
					cr_assert(e.original());
					cr_assert(std::string(e.what()).find(
							  "bad sample 321") !=
						  std::string::npos,
						  "%s", e.what());
					try {
						std::rethrow_if_nested(e);
						cr_assert_fail("nothing nested");
					} catch (const bad_sample &b) {
						cr_assert_eq(b.idx, bad);
					}
				}
				cr_assert(caught, "%s ordered %d batch %zu: no "
					  "exception", name(ex), ordered, bs);
				cr_assert_eq(s.count[bad], 0u);
				// Ordered (and SERIAL): everything before it.
				if (ordered || ex == EACHOBS_SERIAL)
					for (size_t i = 0;
					     i < (bs ? bad - bad % bs : bad); i++)
						cr_assert_eq(s.count[i], 1u);
				// The loader is gone, its threads joined.
				cr_assert_eq(threads_settle(before), before);
			}
		}
	}
}

Test(cxx, a_getobs_error_is_sticky_and_the_loader_closes_after_it)
{
	for (eachobs_executor ex : executors) {
		eachobs::dataset data(100, [](size_t idx, void *) {
			if (idx == 10)
				throw std::bad_alloc();
		});
		eachobs::loader loader(data, 8, opts(ex, true));
		eachobs::obs o;
		size_t k = 0;
		for (int round = 0; round < 3; round++) {
			try {
				while (loader.next(o))
					k++;
				cr_assert_fail("no exception");
			} catch (const eachobs::getobs_error &e) {
				cr_assert_eq(e.index(), 10u);
				cr_assert(std::string(e.what()).find(
						  "std::bad_alloc") !=
					  std::string::npos, "%s", e.what());
				try {
					std::rethrow_exception(e.original());
				} catch (const std::bad_alloc &) {
				}
			}
		}
		cr_assert_eq(k, 10u);
		loader.close();
		cr_assert_not(loader);
	}
}

Test(cxx, an_exception_of_any_type_is_carried)
{
	eachobs::dataset data(10, [](size_t idx, void *) {
		if (idx == 3)
			throw 42;
	});
	eachobs::loader loader(data, 0, opts(EACHOBS_BACKGROUND, true));
	try {
		for (const eachobs::obs &o : loader)
			(void)o;
		cr_assert_fail("no exception");
	} catch (const eachobs::getobs_error &e) {
		cr_assert_eq(e.index(), 3u);
		try {
			std::rethrow_if_nested(e);
		} catch (int v) {
			cr_assert_eq(v, 42);
		}
	}
}

Test(cxx, a_getobs_returning_a_code_is_a_getobs_error_with_nothing_nested)
{
	for (eachobs_executor ex : executors) {
		eachobs::dataset data(50, [](size_t idx, void *) -> int {
			return idx == 7 ? -EBADMSG : 0;
		});
		eachobs::loader loader(data, 0, opts(ex, true));
		try {
			for (const eachobs::obs &o : loader)
				(void)o;
			cr_assert_fail("no exception");
		} catch (const eachobs::getobs_error &e) {
			cr_assert_eq(e.code(), -EBADMSG);
			cr_assert_eq(e.index(), 7u);
			cr_assert_not(e.original());
			cr_assert_null(dynamic_cast<const std::nested_exception *>(&e));
			std::rethrow_if_nested(e); // nothing: no terminate
		}
	}
}

// A get() that returns exception_code (-ECANCELED) itself did not throw:
// the error says it failed, with nothing nested, and under SKIP its
// failure says it did not throw, beside one that did.
Test(cxx, a_get_returning_the_exception_code_is_not_taken_for_a_throw)
{
	for (eachobs_executor ex : executors) {
		eachobs::dataset data(50, [](size_t idx, void *) -> int {
			return idx == 7 ? eachobs::exception_code : 0;
		});
		eachobs::loader loader(data, 0, opts(ex, true));
		try {
			for (const eachobs::obs &o : loader)
				(void)o;
			cr_assert_fail("no exception");
		} catch (const eachobs::getobs_error &e) {
			std::string what = e.what();
			cr_assert_eq(e.code(), eachobs::exception_code);
			cr_assert_eq(e.index(), 7u);
			cr_assert_not(e.original());
			cr_assert(what.find("failed at index 7") != std::string::npos &&
					  what.find("threw") == std::string::npos,
				  "%s", what.c_str());
		}
	}
	for (eachobs_executor ex : executors) {
		eachobs::dataset data(100, [](size_t idx, void *) -> int {
			if (idx == 30)
				throw bad_sample(idx);
			return idx == 60 ? eachobs::exception_code : 0;
		});
		eachobs::loader loader(data, 0, opts(ex, false).on_error(
						       EACHOBS_ON_ERROR_SKIP));
		for (const eachobs::obs &o : loader)
			(void)o;
		std::vector<eachobs::failure> f = loader.failures();
		cr_assert_eq(f.size(), 2u);
		for (const eachobs::failure &x : f) {
			cr_assert_eq(x.code, eachobs::exception_code);
			cr_assert_eq(x.threw, x.index == 30, "index %zu: threw %d",
				     x.index, (int)x.threw);
			cr_assert_eq(static_cast<bool>(x.exception), x.index == 30);
		}
	}
}

Test(cxx, skip_goes_on_and_failures_keep_the_exceptions)
{
	const size_t n = 300;
	for (eachobs_executor ex : executors) {
		eachobs::dataset data(n, [](size_t idx, void *obs) {
			if (idx % 100 == 50)
				throw bad_sample(idx);
			*static_cast<size_t *>(obs) = idx;
		});
		eachobs::loader loader(data, sizeof(size_t),
				       opts(ex, false).on_error(
					       EACHOBS_ON_ERROR_SKIP));
		size_t k = 0;
		for (const eachobs::obs &o : loader) {
			cr_assert_neq(o.index % 100, 50u);
			k++;
		}
		cr_assert_eq(k, n - 3);
		cr_assert_eq(loader.skipped(), 3u);
		std::vector<eachobs::failure> f = loader.failures();
		cr_assert_eq(f.size(), 3u);
		for (const eachobs::failure &x : f) {
			cr_assert_eq(x.index % 100, 50u);
			cr_assert_eq(x.code, eachobs::exception_code);
			cr_assert(x.exception);
			try {
				std::rethrow_exception(x.exception);
			} catch (const bad_sample &b) {
				cr_assert_eq(b.idx, x.index);
			}
		}
	}
}

// An exception in the training loop's body unwinds through the range-for:
// the loader's destructor closes it, every worker thread is joined and
// no getobs runs afterwards.
Test(cxx, an_exception_in_the_loop_body_closes_the_loader)
{
	for (eachobs_executor ex : executors) {
		int before = threads_now();
		std::atomic<bool> closed{ false };
		std::atomic<long> late{ 0 };
		eachobs::dataset data(100000, [&](size_t, void *) {
			if (closed)
				late++;
		});
		try {
			eachobs::loader loader(data, 0, opts(ex, false));
			size_t k = 0;
			for (const eachobs::obs &o : loader) {
				(void)o;
				if (++k == 100)
					throw bad_sample(k);
			}
		} catch (const bad_sample &b) {
			closed = true;
			cr_assert_eq(b.idx, 100u);
		}
		cr_assert_eq(threads_settle(before), before,
			     "%s: threads left running", name(ex));
		cr_assert_eq(late, 0);
	}
}

Test(cxx, a_loader_moves_and_the_moved_from_one_is_empty)
{
	const size_t n = 1000;
	const int initial = threads_now();
	counted data(n);
	seen s(n);
	eachobs::loader a(data, sizeof(size_t), opts(EACHOBS_BACKGROUND, true));
	eachobs::obs o;
	for (int i = 0; i < 100 && a.next(o); i++)
		s.add(o.index, o.data);

	eachobs::loader b(std::move(a));
	cr_assert_not(a);
	cr_assert_null(a.get());
	cr_assert_eq(a.size(), 0u);
	try {
		a.next(o);
		cr_assert_fail("next on an empty loader");
	} catch (const eachobs::error &e) {
		cr_assert_eq(e.code(), -EINVAL);
	}

	eachobs::loader c; // empty, then assigned
	c = std::move(b);
	cr_assert_not(b);
	for (const eachobs::obs &x : c)
		s.add(x.index, x.data);
	s.all_once("moved");

	c.close();
	cr_assert_eq(threads_settle(initial), initial);

	// Assigning over an open loader closes it first.
	counted other(n);
	eachobs::loader d(other, sizeof(size_t), opts(EACHOBS_BACKGROUND, false));
	cr_assert_eq(threads_now(), initial + 3);
	d = eachobs::loader(eachobs::dataset(10, [](size_t idx, void *obs) {
				    *static_cast<size_t *>(obs) = idx;
			    }),
			    sizeof(size_t), opts(EACHOBS_SERIAL, false));
	cr_assert_eq(threads_settle(initial), initial,
		     "the assigned-over loader's 3 workers not joined");
	size_t k = 0;
	for (const eachobs::obs &x : d)
		cr_assert_eq(*x.as<size_t>(), k++);
	cr_assert_eq(k, 10u);

	static_assert(!std::is_copy_constructible_v<eachobs::loader>);
	static_assert(std::is_nothrow_move_constructible_v<eachobs::loader>);
	static_assert(std::is_nothrow_move_assignable_v<eachobs::loader>);
}

Test(cxx, hold_keeps_items_until_released_or_their_handle_goes)
{
	for (eachobs_executor ex : executors) {
		counted data(100);
		eachobs::loader loader(data, sizeof(size_t),
				       opts(ex, true).hold(2));
		eachobs::obs o;
		cr_assert(loader.next(o));
		eachobs::held<eachobs::obs> first = loader.keep(o);
		cr_assert(loader.next(o));
		eachobs::obs second = o;
		// Two held: the next call says -ENOBUFS, not sticky.
		try {
			loader.next(o);
			cr_assert_fail("a third item while two are held");
		} catch (const eachobs::error &e) {
			cr_assert_eq(e.code(), -ENOBUFS);
		}
		cr_assert_eq(*first->as<size_t>(), 0u);
		cr_assert_eq(*second.as<size_t>(), 1u);
		loader.release(second); // explicitly
		cr_assert(loader.next(o));
		cr_assert_eq(o.index, 2u);
		eachobs::held<eachobs::obs> third = loader.keep(o);
		eachobs::held<eachobs::obs> moved = std::move(third);
		cr_assert_not(third);
		cr_assert(moved);
		first.reset(); // by the handle
		moved = eachobs::held<eachobs::obs>(); // releases too
		size_t k = 3;
		for (const eachobs::obs &x : loader) {
			cr_assert_eq(x.index, k++);
			loader.release(x);
		}
		cr_assert_eq(k, 100u);
	}
	// A handle may outlive its loader: it then releases nothing.
	counted data(10);
	eachobs::held<eachobs::batch> late;
	{
		eachobs::loader loader(data, sizeof(size_t),
				       eachobs::options().hold(1).batchsize(4)
					       .ordered());
		eachobs::batch b;
		cr_assert(loader.next(b));
		late = loader.keep(b);
		cr_assert_eq(late->count, 4u);
	}
	late.reset();
	// keep() without hold is an error, not a dangling handle.
	eachobs::loader loader(data, sizeof(size_t));
	eachobs::obs o;
	loader.next(o);
	try {
		(void)loader.keep(o);
		cr_assert_fail("keep without hold");
	} catch (const eachobs::error &e) {
		cr_assert_eq(e.code(), -EINVAL);
	}
}

Test(cxx, checkpoint_and_resume_yield_exactly_the_rest)
{
	const size_t n = 3000;
	for (eachobs_executor ex : executors) {
		for (bool ordered : { false, true }) {
			for (size_t bs : { size_t(0), size_t(10) }) {
				counted data(n);
				seen s(n);
				eachobs::options o = opts(ex, ordered)
							     .batchsize(bs)
							     .shuffle()
							     .seed(7);
				std::vector<unsigned char> ck;
				{
					eachobs::loader first(data,
							      sizeof(size_t), o);
					eachobs::obs x;
					eachobs::batch b;
					for (int i = 0; i < 77; i++) {
						if (bs) {
							cr_assert(first.next(b));
							for (size_t j = 0;
							     j < b.count; j++)
								s.add(b.idx[j],
								      b.as<size_t>() + j);
						} else {
							cr_assert(first.next(x));
							s.add(x.index, x.data);
						}
					}
					ck = first.checkpoint();
					cr_assert_gt(ck.size(), 0u);
				}
				eachobs::loader rest(data, sizeof(size_t),
						     o.resume(ck));
				size_t items = bs ? n / bs : n;
				cr_assert_eq(rest.size(), items - 77);
				if (bs)
					for (const eachobs::batch &b :
					     rest.batches())
						for (size_t j = 0; j < b.count;
						     j++)
							s.add(b.idx[j],
							      b.as<size_t>() + j);
				else
					for (const eachobs::obs &x : rest)
						s.add(x.index, x.data);
				s.all_once(name(ex));
			}
		}
	}
	// Damaged bytes: an error at start, with its code.
	counted data(10);
	std::vector<unsigned char> junk(100, 0xab);
	try {
		eachobs::loader l(data, 8, eachobs::options().resume(junk));
		cr_assert_fail("resumed from junk");
	} catch (const eachobs::error &e) {
		cr_assert_eq(e.code(), -EINVAL);
	}
}

// interrupt() from another thread while the consumer waits for index 0,
// whose getobs waits for that thread: the loop throws interrupted, and
// iterating again yields everything once.
Test(cxx, interrupt_throws_interrupted_and_nothing_is_lost)
{
	const size_t n = 50;
	for (eachobs_executor ex : executors) {
		std::mutex m;
		std::condition_variable cv;
		bool started = false, go = false;
		eachobs::dataset data(n, [&](size_t idx, void *obs) -> int {
			*static_cast<size_t *>(obs) = idx;
			if (idx != 0)
				return 0;
			std::unique_lock<std::mutex> g(m);
			started = true;
			cv.notify_all();
			// Failing, not hanging, if the test breaks.
			bool ok = cv.wait_for(g, std::chrono::seconds(20),
					      [&] { return go; });
			return ok ? 0 : -ETIMEDOUT;
		});
		eachobs::loader loader(data, sizeof(size_t), opts(ex, true));
		std::thread t([&] {
			std::unique_lock<std::mutex> g(m);
			cv.wait(g, [&] { return started; });
			loader.interrupt();
			go = true;
			cv.notify_all();
		});
		seen s(n);
		s.in_order = true;
		int interrupts = 0;
		for (;;) {
			try {
				for (const eachobs::obs &o : loader)
					s.add(o.index, o.data);
				break;
			} catch (const eachobs::interrupted &e) {
				cr_assert_eq(e.code(), -EINTR);
				interrupts++;
			}
		}
		t.join();
		cr_assert_eq(interrupts, 1, "%s", name(ex));
		s.all_once(name(ex));
	}
	// Before the first item: the first call answers it.
	counted data(20);
	eachobs::loader loader(data, sizeof(size_t));
	loader.interrupt();
	cr_assert_eq(eachobs_interrupt(loader.get()), 0);
	try {
		(void)loader.begin();
		cr_assert_fail("not interrupted");
	} catch (const eachobs::interrupted &) {
	}
	size_t k = 0;
	for (const eachobs::obs &o : loader)
		k += o.index < 20;
	cr_assert_eq(k, 20u);
}

Test(cxx, datasets_from_objects_lambdas_and_int_returning_get)
{
	// An rvalue object is moved into the loader.
	struct squares {
		size_t size() const { return 64; }
		int get(size_t idx, void *obs) const
		{
			*static_cast<size_t *>(obs) = idx * idx;
			return 0;
		}
	};
	eachobs::loader a(squares(), sizeof(size_t),
			  eachobs::options().ordered());
	size_t k = 0;
	for (const eachobs::obs &o : a) {
		cr_assert_eq(*o.as<size_t>(), k * k);
		k++;
	}
	cr_assert_eq(k, 64u);
	// A mutable lambda with state of its own, moved in.
	eachobs::loader b(eachobs::dataset(8,
					   [tag = std::string("x")](
						   size_t idx, void *obs) mutable {
						   tag += "y";
						   *static_cast<size_t *>(obs) = idx;
					   }),
			  sizeof(size_t), opts(EACHOBS_SERIAL, false));
	k = 0;
	for (const eachobs::obs &o : b)
		k += o.index;
	cr_assert_eq(k, 28u);
	// size() throwing stops the constructor, nothing started.
	struct broken {
		size_t size() const { throw bad_sample(0); }
		void get(size_t, void *) {}
	};
	try {
		eachobs::loader c(broken(), 0);
		cr_assert_fail("no exception from size()");
	} catch (const bad_sample &) {
	}
}

Test(cxx, options_from_a_c_struct_and_errors_at_start)
{
	eachobs_options c{};
	c.nthreads = 2;
	c.ordered = true;
	c.batchsize = 3;
	c.drop_last = true;
	counted data(10);
	eachobs::loader loader(data, sizeof(size_t), c);
	cr_assert_eq(loader.size(), 3u);
	size_t k = 0;
	for (const eachobs::batch &b : loader.batches())
		cr_assert_eq(b.idx[0], 3 * k++);
	cr_assert_eq(k, 3u);

	try {
		eachobs::loader bad(data, 8, eachobs::options().nthreads(
						     EACHOBS_MAX_THREADS + 1));
		cr_assert_fail("started with too many threads");
	} catch (const eachobs::error &e) {
		cr_assert_eq(e.code(), -EINVAL);
		cr_assert_str_eq(e.what(), eachobs_strerror(-EINVAL));
	}
	// Owned indices outlive the options they were given to.
	eachobs::loader sub = [&] {
		eachobs::options o;
		o.indices(std::vector<size_t>{ 9, 1, 5 }).ordered();
		return eachobs::loader(data, sizeof(size_t), o);
	}();
	std::vector<size_t> got;
	for (const eachobs::obs &o : sub)
		got.push_back(o.index);
	cr_assert(got == (std::vector<size_t>{ 9, 1, 5 }));
}

Test(cxx, a_pool_serves_loader_after_loader)
{
	eachobs::pool pool(2);
	eachobs::pool moved(std::move(pool));
	cr_assert_null(pool.get());
	for (int epoch = 0; epoch < 3; epoch++) {
		counted data(500);
		eachobs::loader loader(data, sizeof(size_t),
				       eachobs::options()
					       .pool(moved)
					       .executor(EACHOBS_BACKGROUND)
					       .shuffle()
					       .epoch(epoch));
		seen s(500);
		for (const eachobs::obs &o : loader)
			s.add(o.index, o.data);
		s.all_once("pool");
		cr_assert_eq(loader.stats().nworkers, 2u);
	}
	try {
		eachobs::pool none(0);
		cr_assert_fail("a pool of 0 threads");
	} catch (const eachobs::error &e) {
		cr_assert_eq(e.code(), -EINVAL);
	}
}

Test(cxx, set_length_and_length_from_cpp)
{
	eachobs::dataset data(20, [](size_t idx, void *) {
		eachobs::set_length(idx % 8);
	});
	eachobs::loader loader(data, 8, opts(EACHOBS_THREADED, true));
	for (const eachobs::obs &o : loader)
		cr_assert_eq(loader.length(o), o.index % 8);
	try {
		eachobs::set_length(1); // outside getobs
		cr_assert_fail("set_length outside getobs");
	} catch (const eachobs::error &e) {
		cr_assert_eq(e.code(), -EINVAL);
	}
	cr_assert_not(eachobs::cancelled());
	cr_assert_eq(eachobs::seed(1, 2, 3), eachobs_seed(1, 2, 3));
}

Test(cxx, fields_from_cpp_are_arrays_of_their_own)
{
	const size_t n = 300, bs = 16;
	std::vector<size_t> sizes{ 3 * sizeof(float), sizeof(int64_t) };
	eachobs::dataset data(n, [](size_t idx, void *obs) {
		float *x = static_cast<float *>(obs);
		int64_t *label = eachobs::field<int64_t>(1);
		if (eachobs::field(0) != obs || !label || eachobs::field(2))
			throw std::logic_error("eachobs::field misplaced");
		for (int i = 0; i < 3; i++)
			x[i] = static_cast<float>(idx) + static_cast<float>(i);
		*label = static_cast<int64_t>(idx) * 5;
	});
	for (eachobs_executor ex : executors) {
		seen s(n);
		eachobs::loader loader(data, 3 * sizeof(float) + sizeof(int64_t),
				       opts(ex, true).batchsize(bs).fields(sizes));
		for (const eachobs::batch &b : loader.batches()) {
			const float *x = loader.field<float>(b, 0);
			const int64_t *y = loader.field<int64_t>(b, 1);
			cr_assert_eq(x, b.as<float>(), "%s", name(ex));
			cr_assert_null(loader.field(b, 2));
			cr_assert_eq(reinterpret_cast<uintptr_t>(y) % 64, 0);
			for (size_t j = 0; j < b.count; j++) {
				cr_assert_eq(b.lengths[j], sizes[0]);
				cr_assert_eq(x[3 * j + 2],
					     static_cast<float>(b.idx[j] + 2));
				cr_assert_eq(y[j],
					     static_cast<int64_t>(b.idx[j]) * 5);
				s.add(b.idx[j], &b.idx[j]);
			}
		}
		s.all_once(name(ex));
	}
	// Single observations, and an empty vector: no fields.
	eachobs::loader single(data, 3 * sizeof(float) + sizeof(int64_t),
			       opts(EACHOBS_SERIAL, true).fields(sizes));
	for (const eachobs::obs &o : single)
		cr_assert_eq(*single.field<int64_t>(o, 1),
			     static_cast<int64_t>(o.index) * 5);
	eachobs::options none = eachobs::options().fields({});
	cr_assert_null(none.c().fields);
	cr_assert_eq(none.c().nfields, 0);
	cr_assert_null(eachobs::field(0), "a field outside get()");
	cr_assert_null(eachobs::loader().field(eachobs::batch(), 0));
}
