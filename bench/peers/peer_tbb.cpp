/*
 * Peer (b): oneTBB's parallel_pipeline, the library's own answer to
 * "load items in parallel, hand them to one consumer in a bounded way".
 * Three filters: a serial input filter that emits indices, a parallel
 * filter that calls getobs, and a serial consumer filter, in order with
 * --ordered (serial_in_order) and out of order otherwise. At most
 * max(16, 4 * P) items are in flight (eachobs's default buffersize).
 *
 * The pipeline runs inside a task_arena of P slots. TBB's default limit
 * is one thread per core, so without the arena a sleeping getobs would
 * run on 2 threads here whatever P is; the global_control raises the
 * process-wide cap to match. In the arena the calling thread is one of
 * the P and runs filters too, like eachobs's THREADED with P - 1 workers.
 */
#include "peer.h"

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_pipeline.h>
#include <oneapi/tbb/task_arena.h>

#include <atomic>
#include <cstddef>

namespace {

uint64_t run(const peer_args *a, unsigned p, unsigned batch, void *)
{
	(void)batch;
	tbb::global_control gc(tbb::global_control::max_allowed_parallelism,
			       p);
	tbb::task_arena arena(static_cast<int>(p));
	const size_t tokens = 4u * p < 16 ? 16 : 4u * p;
	const bool first = a->kase == PEER_FIRST;
	peer_seen s;
	std::atomic<bool> stop{ false };
	size_t next = 0;
	uint64_t t0, t = 0;

	peer_seen_init(&s, a->n, a->ordered);
	t0 = now_ns();
	arena.execute([&] {
		tbb::parallel_pipeline(
			tokens,
			tbb::make_filter<void, size_t>(
				tbb::filter_mode::serial_in_order,
				[&](tbb::flow_control &fc) -> size_t {
					if (next == a->n ||
					    stop.load(std::memory_order_relaxed)) {
						fc.stop();
						return 0;
					}
					return next++;
				}) &
				tbb::make_filter<size_t, size_t>(
					tbb::filter_mode::parallel,
					[&](size_t i) {
						return peer_getobs(a->t_ns, i);
					}) &
				tbb::make_filter<size_t, void>(
					a->ordered ? tbb::filter_mode::serial_in_order
						   : tbb::filter_mode::serial_out_of_order,
					[&](size_t v) {
						if (stop.load(std::memory_order_relaxed))
							return;
						peer_seen_take(&s, v);
						if (first) {
							t = now_ns() - t0;
							stop.store(true, std::memory_order_relaxed);
						}
					}));
	});
	return peer_seen_finish(&s, first, t, t0);
}

} // namespace

int main(int argc, char **argv)
{
	peer_args a;

	peer_parse_args(argc, argv, &a, "peer_tbb");
	peer_measure(&a, "tbb", "parallel_pipeline", false,
		     "", run, nullptr);
	return 0;
}
