/*
 * examples/basic.c in C++, through include/eachobs.hpp: the same 10000
 * "images" of 784 floats on 8 threads, consumed in place by a range-for;
 * then a dataset whose getobs throws, caught in the training loop.
 */
#include <eachobs.hpp>

#include <cstdio>
#include <cstring>
#include <stdexcept>

int main(int argc, char **argv)
{
	if (argc > 1) { // no arguments but --help
		bool help = std::strcmp(argv[1], "--help") == 0 ||
			    std::strcmp(argv[1], "-h") == 0;
		std::fprintf(help ? stdout : stderr, "usage: %s [--help]\n",
			     argv[0]);
		if (help)
			std::puts("Loads 10000 images on 8 threads, in place, "
				  "in C++; then one that throws.");
		return help ? 0 : 2;
	}

	const float scale = 1.0f / 255;
	eachobs::dataset images(10000, [scale](size_t idx, void *obs) {
		float *x = static_cast<float *>(obs); // 784 floats, eachobs's
		for (size_t i = 0; i < 784; i++)
			x[i] = scale * static_cast<float>((idx + i) % 256);
	});
	size_t count = 0;
	double sum = 0;
	{
		eachobs::loader loader(images, 784 * sizeof(float),
				       eachobs::options().nthreads(8));
		for (const eachobs::obs &o : loader) {
			sum += o.as<float>()[0]; // valid until the next one
			count++;
		}
	} // the loader closes here: threads joined, slots freed
	std::printf("%zu observations, mean first pixel %.4f\n", count,
		    sum / static_cast<double>(count));

	eachobs::dataset records(1000, [](size_t idx, void *) {
		if (idx == 123)
			throw std::runtime_error("corrupt record");
	});
	try {
		eachobs::loader loader(records, 0, eachobs::options().ordered());
		for (const eachobs::obs &o : loader)
			(void)o; // the training step
	} catch (const eachobs::getobs_error &e) {
		std::printf("%s\n", e.what()); // names index 123
		try {
			std::rethrow_if_nested(e); // what getobs threw
		} catch (const std::runtime_error &original) {
			return count != 10000 || e.index() != 123;
		}
	}
	return 1;
}
