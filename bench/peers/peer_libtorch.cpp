/*
 * Peer (c): libtorch's C++ DataLoader (torch::data) with P worker threads.
 * The dataset yields a size_t per index (no tensors), so what is timed is
 * the loader's machinery: a sampler, batch requests through a queue, P
 * workers that each load a whole batch, and results back through another
 * queue. Each batch is a std::vector; batch 1 is the per-item hand-off,
 * batch 64 amortizes it (and one worker then sleeps 64 times in a row).
 * Unordered runs set enforce_ordering(false); ordered ones keep the
 * default (true). Every other option is libtorch's default (max_jobs = 2
 * batches per worker).
 */
#include "peer.h"

#include <torch/data.h>

#include <cstddef>

namespace {

struct SleepData : torch::data::datasets::Dataset<SleepData, size_t> {
	const peer_args *a;

	explicit SleepData(const peer_args *args) : a(args) {}
	size_t get(size_t index) override
	{
		return peer_getobs(a->t_ns, index);
	}
	torch::optional<size_t> size() const override
	{
		return a->n;
	}
};

uint64_t run(const peer_args *a, unsigned p, unsigned batch, void *)
{
	const bool first = a->kase == PEER_FIRST;
	peer_seen s;
	uint64_t t0, t = 0;

	peer_seen_init(&s, a->n, a->ordered);
	t0 = now_ns();
	{
		auto loader = torch::data::make_data_loader<
			torch::data::samplers::SequentialSampler>(
			SleepData(a), torch::data::DataLoaderOptions()
					      .batch_size(batch)
					      .workers(p)
					      .enforce_ordering(a->ordered));
		for (auto &b : *loader) {
			for (size_t v : b)
				peer_seen_take(&s, v);
			if (first) {
				t = now_ns() - t0;
				break;
			}
		}
	} /* the loader's destructor joins its workers */
	return peer_seen_finish(&s, first, t, t0);
}

} // namespace

int main(int argc, char **argv)
{
	peer_args a;

	peer_parse_args(argc, argv, &a, "peer_libtorch");
	peer_measure(&a, "libtorch", "DataLoader", true, "", run, nullptr);
	return 0;
}
