// The public header compiled as C++17 with every warning an error: the
// inline eachobs_parallel and eachobs_get_stats must be valid C++ too.
// Starts and drains short iterations with NULL options and with a named
// options struct, through the shared library. Exits 1 on any failure.
#include "eachobs.h"

#include <cstdio>
#include <vector>

namespace {

const size_t n = 200;

int fail(const char *what, int rc)
{
	std::fprintf(stderr, "cxx_header: %s: %d (%s)\n", what, rc,
		     eachobs_strerror(rc));
	return 1;
}

// Every index once; in increasing order when ordered.
int run(const eachobs_options *opts, const char *what)
{
	std::vector<unsigned> calls(n);
	eachobs_dataset data{};
	data.ctx = &calls;
	data.numobs = [](void *) -> size_t { return n; };
	data.getobs = [](void *ctx, size_t idx, void *obs) -> int {
		static_cast<std::vector<unsigned> *>(ctx)->at(idx)++;
		*static_cast<size_t *>(obs) = idx;
		return 0;
	};
	data.obs_size = sizeof(size_t);

	eachobs_iter *it = nullptr;
	int rc = eachobs_parallel(&it, &data, opts);
	if (rc < 0)
		return fail(what, rc);
	const void *obs;
	size_t idx, yielded = 0;
	while ((rc = eachobs_next(it, &obs, &idx)) == 1) {
		if (*static_cast<const size_t *>(obs) != idx ||
		    (opts && opts->ordered && idx != yielded))
			return fail(what, -1);
		yielded++;
	}
	eachobs_stats st{};
	int src = eachobs_get_stats(it, &st);
	eachobs_close(it);
	if (rc != 0)
		return fail(what, rc);
	if (src != 0 || st.yielded != n)
		return fail("eachobs_get_stats", src);
	for (unsigned c : calls)
		if (c != 1)
			return fail(what, -2);
	return 0;
}

} // namespace

int main()
{
	eachobs_options o{};
	o.nthreads = 2;
	o.ordered = true;
	o.buffersize = 4;

	if (run(nullptr, "NULL options") || run(&o, "named options"))
		return 1;
	std::printf("cxx_header: eachobs.h compiles as C++17 and runs "
		    "(library %s)\n", eachobs_version_string());
	return 0;
}
