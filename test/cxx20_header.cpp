// Both public headers compiled as C++20 with -Wall -Wextra -Werror
// -pedantic, and C++20 designated initializers for eachobs_options, in
// declaration order, handed to the C++ loader: as a named struct and in
// place. Exits 1 on any failure.
#include "eachobs.hpp"

#include <cstdio>

namespace {

// Every index once, in order.
bool run(eachobs::loader &loader, size_t n, const char *what)
{
	size_t k = 0;
	for (const eachobs::batch &b : loader.batches())
		for (size_t j = 0; j < b.count; j++)
			if (b.idx[j] != k++ || b.as<size_t>()[j] != b.idx[j])
				break;
	if (k == n)
		return true;
	std::fprintf(stderr, "cxx20_header: %s: %zu of %zu in order\n", what,
		     k, n);
	return false;
}

} // namespace

int main()
{
	const size_t n = 100;
	eachobs::dataset data(n, [](size_t idx, void *obs) {
		*static_cast<size_t *>(obs) = idx;
	});

	eachobs_options o = { .nthreads = 2,
			      .buffersize = 8,
			      .executor = EACHOBS_BACKGROUND,
			      .ordered = true,
			      .batchsize = 10 };
	eachobs::loader named(data, sizeof(size_t), o);
	eachobs::loader in_place(data, sizeof(size_t),
				 { .nthreads = 2, .ordered = true,
				   .batchsize = 7, .hold = 0 });
	if (!run(named, n, "named struct") ||
	    !run(in_place, n, "in place"))
		return 1;
	std::printf("cxx20_header: eachobs.h and eachobs.hpp compile as "
		    "C++20 -pedantic; designated initializers work\n");
	return 0;
}
