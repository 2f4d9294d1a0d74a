/*
 * A real training run: a small MLP (784-256-10) learns Fashion-MNIST
 * (60,000 training and 10,000 test images of 28 x 28 clothes, 10 classes)
 * with libtorch, fed by eachobs, and the same run fed by libtorch's own
 * DataLoader beside it, epoch by epoch.
 *
 * eachobs: an observation is made of two fields (eachobs_options.fields),
 * 784 float32 pixels and one int64 label, and each field of a batch of 128
 * is one array of its own. getobs normalizes one image,
 * (x / 255 - 0.2860) / 0.3530, into its place in the batch's pixels and
 * writes its label into its place in the batch's labels (eachobs_field).
 * Every batch becomes two tensors through eachobs_dlpack_fields and
 * at::fromDLPack, in place: x [count, 784] float32 over the pixels, y
 * [count] int64 over the labels, what cross_entropy takes as it is. With
 * hold = 2 the previous batch stays alive (as it would while its copy to a
 * GPU is in flight) until the next one has been taken; then its tensors
 * are dropped and the last deleter gives the batch back to the loader.
 * Shuffled per epoch, loaded by one persistent pool.
 *
 * libtorch: torch::data::datasets::MNIST on the same files (decompressed
 * into a temporary directory), Normalize and Stack, RandomSampler,
 * make_data_loader with as many workers.
 *
 * Both models start from the same weights (the same seed). Per epoch and
 * loader: the training loss, the accuracy on the 10,000 test images, the
 * batches per second of the training loop, the seconds it waited for
 * data and the CPU seconds the process used (trainer, loaders and BLAS
 * together); at the end each loader alone, without training.
 *
 * Checked on every run, on the eachobs side: each tensor's data is its
 * field's array in the batch buffer itself (no copy), inside the memory
 * the loader allocated; each label in the label tensor is the label of the
 * index the batch names; every training image comes exactly once per
 * epoch; no call ever finds both held batches still taken (-ENOBUFS: a
 * batch did not come back when its tensors were deleted); every tensor
 * made was deleted; the iterator's counts match; and closing the iterator
 * freed its memory, which it does only once no tensor holds a batch. Any
 * failure exits 1.
 *
 *   example_libtorch_train [--epochs N] [--subset N] [--threads P]
 *                          [--seed S] [--data DIR] [--check]
 *
 * --check (for CI): one epoch on 6,000 images unless --epochs or --subset
 * say otherwise; exits 1 unless both loaders reach a test accuracy above
 * 0.6 (chance is 0.1) and every check held. Without the dataset (Debian:
 * dataset-fashion-mnist) it exits 77, which meson counts as skipped.
 */
#include <eachobs.h>
#include <eachobs_dlpack.h>

#include <ATen/DLConvertor.h>
#include <torch/data.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>

#include <zlib.h>

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr size_t kSide = 28, kPixels = kSide * kSide, kClasses = 10;
/* An observation's two fields: the normalized image, then its label. */
constexpr size_t kFields[] = { kPixels * sizeof(float), sizeof(int64_t) };
constexpr size_t kBatch = 128;
constexpr float kMean = 0.2860f, kStd = 0.3530f;
constexpr double kCheckAccuracy = 0.6;
constexpr const char *kDefaultData = "/usr/share/datasets/fashion-mnist";

/* A failed check or a broken file: main prints it and exits 1. */
struct Failure : std::runtime_error {
	using std::runtime_error::runtime_error;
};

[[noreturn]] void fail(const std::string &what)
{
	throw Failure(what);
}

double now_s()
{
	using namespace std::chrono;
	return duration<double>(steady_clock::now().time_since_epoch()).count();
}

/* CPU seconds of every thread of the process: the trainer, the loaders,
 * BLAS's. On a shared machine steadier than the wall clock. */
double cpu_s()
{
	struct timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* ---- The IDX files ---------------------------------------------------- */

/* One split: the decompressed files, kept whole so that libtorch's MNIST
 * can be given the same bytes; pixels and labels point into them. */
struct Split {
	std::vector<uint8_t> image_file, label_file;
	const uint8_t *pixels = nullptr, *labels = nullptr;
	size_t n = 0;
};

uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

/* Decompress DIR/NAME.gz, or read DIR/NAME as it is (gzread passes
 * uncompressed files through). False when neither exists. */
bool read_idx(const std::string &dir, const std::string &name,
	      std::vector<uint8_t> &out)
{
	std::string path = dir + "/" + name + ".gz";
	struct stat st;
	if (stat(path.c_str(), &st) != 0) {
		path = dir + "/" + name;
		if (stat(path.c_str(), &st) != 0)
			return false;
	}
	gzFile f = gzopen(path.c_str(), "rb");
	if (!f)
		fail(path + ": cannot open: " + std::strerror(errno));
	gzbuffer(f, 1 << 20);
	out.clear();
	uint8_t chunk[1 << 16];
	int got;
	while ((got = gzread(f, chunk, sizeof chunk)) > 0)
		out.insert(out.end(), chunk, chunk + got);
	int err;
	std::string msg = got < 0 ? gzerror(f, &err) : "";
	gzclose(f);
	if (got < 0)
		fail(path + ": " + msg);
	return true;
}

/* Load and check one split (prefix "train" or "t10k"); false when its
 * files are missing. */
bool load_split(const std::string &dir, const std::string &prefix,
		size_t want, Split &s)
{
	if (!read_idx(dir, prefix + "-images-idx3-ubyte", s.image_file) ||
	    !read_idx(dir, prefix + "-labels-idx1-ubyte", s.label_file))
		return false;
	const std::vector<uint8_t> &im = s.image_file, &lb = s.label_file;
	if (im.size() < 16 || be32(&im[0]) != 0x803 || be32(&im[4]) != want ||
	    be32(&im[8]) != kSide || be32(&im[12]) != kSide ||
	    im.size() != 16 + want * kPixels)
		fail(prefix + "-images: not an IDX file of " +
		     std::to_string(want) + " images of 28 x 28");
	if (lb.size() != 8 + want || be32(&lb[0]) != 0x801 ||
	    be32(&lb[4]) != want)
		fail(prefix + "-labels: not an IDX file of " +
		     std::to_string(want) + " labels");
	s.pixels = &im[16];
	s.labels = &lb[8];
	s.n = want;
	for (size_t i = 0; i < s.n; i++)
		if (s.labels[i] >= kClasses)
			fail(prefix + "-labels: label " +
			     std::to_string(s.labels[i]) + " at " +
			     std::to_string(i));
	return true;
}

/* The normalization both loaders apply: libtorch's MNIST divides by 255,
 * its Normalize transform subtracts the mean and divides by the std. */
void normalize(const uint8_t *px, float *out)
{
	for (size_t i = 0; i < kPixels; i++)
		out[i] = ((float)px[i] / 255.0f - kMean) / kStd;
}

/* libtorch's MNIST reads the decompressed files under their original
 * names from a directory: a temporary one, gone once they are read. */
struct TempDir {
	std::string path;
	std::vector<std::string> files;

	TempDir()
	{
		const char *t = std::getenv("TMPDIR");
		std::string tmpl = std::string(t && *t ? t : "/tmp") +
				   "/eachobs-fashion-mnist-XXXXXX";
		if (!mkdtemp(&tmpl[0]))
			fail(tmpl + ": " + std::strerror(errno));
		path = tmpl;
	}
	void write(const std::string &name, const std::vector<uint8_t> &b)
	{
		std::string p = path + "/" + name;
		FILE *f = std::fopen(p.c_str(), "wb");
		if (!f)
			fail(p + ": " + std::strerror(errno));
		files.push_back(p);
		bool ok = std::fwrite(b.data(), 1, b.size(), f) == b.size();
		if (std::fclose(f) != 0 || !ok)
			fail(p + ": write failed");
	}
	~TempDir()
	{
		for (const std::string &f : files)
			unlink(f.c_str());
		rmdir(path.c_str());
	}
};

/* ---- The eachobs side ------------------------------------------------- */

/* The first n training images (--subset). */
struct Train {
	const Split *s;
	size_t n;
};

size_t numobs(void *ctx)
{
	return static_cast<Train *>(ctx)->n;
}

int getobs(void *ctx, size_t idx, void *obs)
{
	const Split *s = static_cast<Train *>(ctx)->s;
	float *x = static_cast<float *>(obs);

	normalize(s->pixels + idx * kPixels, x); /* field 0: obs itself */
	int64_t *y = static_cast<int64_t *>(eachobs_field(1));
	*y = s->labels[idx];
	return 0;
}

/*
 * The batch memory, from an allocator that counts its blocks: where a GPU
 * run would allocate pinned memory. The library frees the block at
 * eachobs_close only when no tensor holds a batch any more, else when the
 * last one is deleted; so none outstanding after close means every batch
 * came back. alloc runs on the consumer's thread, free on any.
 */
struct Memory {
	std::atomic<long> blocks{ 0 };
	const char *base = nullptr;
	size_t size = 0;
};

void *mem_alloc(void *ctx, size_t size, size_t align)
{
	Memory *m = static_cast<Memory *>(ctx);
	void *p = std::aligned_alloc(align, (size + align - 1) / align * align);

	if (p) {
		m->blocks.fetch_add(1, std::memory_order_relaxed);
		m->base = static_cast<const char *>(p);
		m->size = size;
	}
	return p;
}

void mem_free(void *ctx, void *p, size_t)
{
	std::free(p);
	static_cast<Memory *>(ctx)->blocks.fetch_sub(1,
						     std::memory_order_release);
}

/*
 * Every tensor passes through this wrapper, a DLManagedTensor of our own
 * around one that eachobs_dlpack_fields made: its deleter counts, then
 * runs the library's. So "made" against "deleted" says whether libtorch
 * deleted every tensor, on whatever thread it did.
 */
struct Counts {
	std::atomic<uint64_t> made{ 0 }, deleted{ 0 };
};

struct Wrapped {
	DLManagedTensor m;
	DLManagedTensor *inner;
	Counts *counts;
};

void wrapped_deleter(DLManagedTensor *m)
{
	Wrapped *w = static_cast<Wrapped *>(m->manager_ctx);

	w->inner->deleter(w->inner); /* the batch goes back to the loader */
	w->counts->deleted.fetch_add(1, std::memory_order_release);
	delete w;
}

struct IterCloser {
	void operator()(eachobs_iter *it) const { eachobs_close(it); }
};
using Iter = std::unique_ptr<eachobs_iter, IterCloser>;

struct PoolDestroyer {
	void operator()(eachobs_pool *p) const { eachobs_pool_destroy(p); }
};

struct Feed {
	Train data;
	eachobs_pool *pool;
	unsigned threads;
	unsigned long long seed;
	Memory memory;
	Counts counts;
	std::vector<uint8_t> seen; /* per epoch: times each index came */
	uint64_t batches = 0;      /* every batch of every pass */
};

Iter open_epoch(Feed &f, unsigned long long epoch)
{
	eachobs_dataset d = { &f.data, numobs, getobs,
			      kFields[0] + kFields[1] };
	eachobs_allocator a = { mem_alloc, mem_free, &f.memory };
	eachobs_options o = {};
	o.nthreads = f.threads;
	o.pool = f.pool;
	o.batchsize = kBatch;
	o.ordered = true; /* the same batches in the same order every run */
	o.hold = 2;
	o.shuffle = true;
	o.seed = f.seed;
	o.epoch = epoch;
	o.allocator = &a;
	o.fields = kFields; /* pixels and labels, each an array of its own */
	o.nfields = 2;
	eachobs_iter *it;
	int rc = eachobs_parallel(&it, &d, &o);
	if (rc < 0)
		fail(std::string("eachobs_parallel: ") + eachobs_last_error());
	f.seen.assign(f.data.n, 0);
	return Iter(it);
}

/* A batch's fields as tensors, x [count, 784] float32 and y [count]
 * int64, each over its own array in the batch buffer. */
struct Tensors {
	at::Tensor x, y;
};

/* Tensor t of one of a batch's fields, wrapped and counted. */
at::Tensor wrap(Feed &f, DLManagedTensor *t)
{
	Wrapped *w = new Wrapped{ *t, t, &f.counts };
	w->m.manager_ctx = w;
	w->m.deleter = wrapped_deleter;
	f.counts.made.fetch_add(1, std::memory_order_relaxed);
	return at::fromDLPack(&w->m);
}

/* Whether tensor x is bytes bytes at field k's array of batch b, inside
 * the block the loader allocated. */
bool in_place(const Feed &f, eachobs_iter *it, const eachobs_batch &b,
	      size_t k, const at::Tensor &x, size_t bytes)
{
	const char *p = static_cast<const char *>(x.data_ptr());
	return p == eachobs_field_data(it, b.data, k) && p >= f.memory.base &&
	       p + bytes <= f.memory.base + f.memory.size;
}

/* The batch's pixels and labels as tensors over its own memory, checked. */
Tensors to_tensors(Feed &f, eachobs_iter *it, const eachobs_batch &b)
{
	static const eachobs_dlpack_field fields[] = {
		{ { kDLFloat, 32, 1 }, 1, { (int64_t)kPixels } }, /* [784] */
		{ { kDLInt, 64, 1 }, 0, {} },                     /* a scalar */
	};
	DLManagedTensor *t[2];
	if (eachobs_dlpack_fields(it, b.data, fields, 2, t) < 0)
		fail(std::string("eachobs_dlpack_fields: ") +
		     eachobs_last_error());
	Tensors r{ wrap(f, t[0]), wrap(f, t[1]) };

	if (!in_place(f, it, b, 0, r.x, b.count * kFields[0]) ||
	    !in_place(f, it, b, 1, r.y, b.count * kFields[1]))
		fail("a tensor is not its field's array in the batch buffer: "
		     "a copy was made");
	if (r.x.dim() != 2 || r.x.size(0) != (int64_t)b.count ||
	    r.x.size(1) != (int64_t)kPixels || r.x.scalar_type() != at::kFloat)
		fail("the pixels' tensor is not [count, 784] float32");
	if (r.y.dim() != 1 || r.y.size(0) != (int64_t)b.count ||
	    r.y.scalar_type() != at::kLong)
		fail("the labels' tensor is not [count] int64");
	const int64_t *y = r.y.data_ptr<int64_t>();
	for (size_t j = 0; j < b.count; j++) {
		size_t idx = b.idx[j];
		if (idx >= f.data.n || f.seen[idx]++)
			fail("image " + std::to_string(idx) +
			     " came twice in one epoch, or is out of range");
		if (y[j] != f.data.s->labels[idx])
			fail("the label of image " + std::to_string(idx) +
			     " is not the one in the file");
	}
	f.batches++;
	return r;
}

/* After a pass, with every tensor dropped: the checks, then close. */
void close_epoch(Feed &f, Iter it, size_t nbatches)
{
	if (f.counts.deleted.load(std::memory_order_acquire) !=
	    f.counts.made.load(std::memory_order_relaxed))
		fail("a tensor was never deleted: " +
		     std::to_string(f.counts.made.load()) + " made, " +
		     std::to_string(f.counts.deleted.load()) + " deleted");
	for (size_t i = 0; i < f.data.n; i++)
		if (f.seen[i] != 1)
			fail("image " + std::to_string(i) +
			     " did not come in this epoch");
	eachobs_stats st;
	eachobs_get_stats(it.get(), &st);
	if (st.yielded != f.data.n || st.batches != nbatches)
		fail("the iterator yielded " + std::to_string(st.yielded) +
		     " images in " + std::to_string(st.batches) +
		     " batches, not " + std::to_string(f.data.n) + " in " +
		     std::to_string(nbatches));
	it.reset();
	if (f.memory.blocks.load(std::memory_order_acquire) != 0)
		fail("the batch memory was not freed at close: a tensor "
		     "still holds a batch");
}

/* Take the next batch; -ENOBUFS would mean that both held batches are
 * still taken, though the tensors of the previous but one were dropped. */
bool next_batch(Feed &f, eachobs_iter *it, eachobs_batch &b, double &waited)
{
	double t0 = now_s();
	int rc = eachobs_next_batch(it, &b);
	waited += now_s() - t0;
	if (rc == -ENOBUFS)
		fail("eachobs_next_batch: -ENOBUFS: dropped tensors did not "
		     "give their batch back (" +
		     std::to_string(f.counts.made.load()) + " made, " +
		     std::to_string(f.counts.deleted.load()) + " deleted)");
	if (rc < 0)
		fail(std::string("eachobs_next_batch: ") +
		     eachobs_last_error());
	return rc == 1;
}

/* ---- The model -------------------------------------------------------- */

struct Net : torch::nn::Module {
	torch::nn::Linear fc1{ nullptr }, fc2{ nullptr };

	Net()
	{
		fc1 = register_module("fc1", torch::nn::Linear(kPixels, 256));
		fc2 = register_module("fc2", torch::nn::Linear(256, kClasses));
	}
	at::Tensor forward(const at::Tensor &x)
	{
		return fc2(torch::relu(fc1(x)));
	}
};

struct Model {
	std::shared_ptr<Net> net;
	torch::optim::Adam opt;

	explicit Model(uint64_t seed)
		: net((torch::manual_seed(seed), std::make_shared<Net>())),
		  opt(net->parameters(), torch::optim::AdamOptions(1e-3))
	{
	}
	/* One step; the batch's summed loss. */
	double step(const at::Tensor &x, const at::Tensor &y)
	{
		opt.zero_grad();
		at::Tensor loss = torch::nn::functional::cross_entropy(
			net->forward(x), y);
		loss.backward();
		opt.step();
		return loss.item<double>() * (double)x.size(0);
	}
};

struct TestSet {
	at::Tensor x, y;
};

TestSet make_test_set(const Split &s)
{
	TestSet t{ torch::empty({ (int64_t)s.n, (int64_t)kPixels }),
		   torch::empty({ (int64_t)s.n }, torch::kLong) };
	float *x = t.x.data_ptr<float>();
	int64_t *y = t.y.data_ptr<int64_t>();
	for (size_t i = 0; i < s.n; i++) {
		normalize(s.pixels + i * kPixels, x + i * kPixels);
		y[i] = s.labels[i];
	}
	return t;
}

double accuracy(Model &m, const TestSet &t)
{
	torch::NoGradGuard no_grad;
	int64_t n = t.x.size(0), right = 0;

	m.net->eval();
	for (int64_t i = 0; i < n; i += 1000) {
		int64_t len = std::min<int64_t>(1000, n - i);
		at::Tensor out = m.net->forward(t.x.narrow(0, i, len));
		right += out.argmax(1).eq(t.y.narrow(0, i, len)).sum()
				 .item<int64_t>();
	}
	m.net->train();
	return (double)right / (double)n;
}

/* One pass of a loader: trained (model given) or alone. */
struct Pass {
	double loss = 0, seconds = 0, waited = 0, cpu = 0;
	size_t batches = 0;
};

Pass pass_eachobs(Feed &f, unsigned long long epoch, Model *m)
{
	Pass r;
	size_t nbatches = (f.data.n + kBatch - 1) / kBatch;
	double t0 = now_s(), c0 = cpu_s();
	Iter it = open_epoch(f, epoch);
	eachobs_batch b;
	/* The previous batch, alive until the next one has been taken. */
	Tensors prev;

	while (next_batch(f, it.get(), b, r.waited)) {
		Tensors t = to_tensors(f, it.get(), b);
		prev = Tensors(); /* the last deleter gives the batch back */
		if (m)
			r.loss += m->step(t.x, t.y);
		prev = std::move(t);
		r.batches++;
	}
	prev = Tensors();
	close_epoch(f, std::move(it), nbatches);
	r.seconds = now_s() - t0;
	r.cpu = cpu_s() - c0;
	r.loss /= (double)f.data.n;
	return r;
}

/* The libtorch side's dataset: MNIST, normalized, stacked. */
using TorchData = torch::data::datasets::MapDataset<
	torch::data::datasets::MapDataset<
		torch::data::datasets::MNIST,
		torch::data::transforms::Normalize<>>,
	torch::data::transforms::Stack<>>;

template <typename Loader> Pass pass_torch(Loader &loader, size_t n, Model *m)
{
	Pass r;
	double t0 = now_s(), w = t0, c0 = cpu_s();
	auto it = loader.begin();

	/* The first batch is fetched by the first comparison, the others
	 * by ++: both are waiting for data. */
	while (!(it == loader.end())) {
		r.waited += now_s() - w;
		if (m)
			r.loss += m->step(it->data.view({ -1, (int64_t)kPixels }),
					  it->target);
		r.batches++;
		w = now_s();
		++it;
	}
	r.waited += now_s() - w;
	r.seconds = now_s() - t0;
	r.cpu = cpu_s() - c0;
	r.loss /= (double)n;
	return r;
}

/* ---- The command line ------------------------------------------------- */

struct Args {
	unsigned epochs = 5, threads = 0;
	size_t subset = 0;
	unsigned long long seed = 1;
	std::string data = kDefaultData;
	bool check = false, epochs_set = false, subset_set = false;
};

int usage(bool help)
{
	std::fprintf(help ? stdout : stderr,
		     "usage: example_libtorch_train [--epochs N] [--subset N] "
		     "[--threads P]\n"
		     "                              [--seed S] [--data DIR] "
		     "[--check]\n");
	if (help)
		std::fputs(
			"\nTrains an MLP (784-256-10) on Fashion-MNIST with "
			"libtorch, fed by eachobs\n(batches of 128 as tensors "
			"in place, through DLPack) and, side by side,\nby "
			"libtorch's own DataLoader; per epoch and loader it "
			"prints the training\nloss, the test accuracy, batches/s, "
			"the seconds spent waiting for data and\nthe CPU seconds "
			"used.\n\n"
			"  --epochs N   epochs (default 5)\n"
			"  --subset N   train on the first N of the 60,000 "
			"images (default all)\n"
			"  --threads P  loader threads, and DataLoader workers "
			"(default: the CPUs)\n"
			"  --seed S     the weights' and the shuffle's seed "
			"(default 1)\n"
			"  --data DIR   the IDX files, gzipped or not (default "
			"/usr/share/datasets/\n"
			"               fashion-mnist, from Debian's "
			"dataset-fashion-mnist)\n"
			"  --check      for CI: 1 epoch on 6,000 images unless "
			"told otherwise; exits 1\n"
			"               unless both test accuracies pass 0.6 "
			"and every check held\n\n"
			"Exits 77 (skipped) when the dataset is missing.\n",
			stdout);
	return help ? 0 : 2;
}

/* A whole number in [lo, hi], or false. */
bool number(const char *s, unsigned long long lo, unsigned long long hi,
	    unsigned long long &out)
{
	char *end;
	errno = 0;
	if (!s || *s < '0' || *s > '9')
		return false;
	out = std::strtoull(s, &end, 10);
	return !errno && !*end && out >= lo && out <= hi;
}

/* 0 with the arguments, or the exit status (usage). */
int parse(int argc, char **argv, Args &a)
{
	for (int i = 1; i < argc; i++) {
		std::string o = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
		unsigned long long x;
		if (o == "--help" || o == "-h") {
			usage(true);
			return -1;
		}
		if (o == "--check") {
			a.check = true;
			continue;
		}
		if (o == "--data" && v)
			a.data = v;
		else if (o == "--epochs" && number(v, 1, 1000, x))
			a.epochs = (unsigned)x, a.epochs_set = true;
		else if (o == "--subset" && number(v, 1, 60000, x))
			a.subset = x, a.subset_set = true;
		else if (o == "--threads" && number(v, 1, 256, x))
			a.threads = (unsigned)x;
		else if (o == "--seed" && number(v, 0, ~0ull, x))
			a.seed = x;
		else {
			std::fprintf(stderr, "example_libtorch_train: bad "
					     "option or value: %s%s%s\n",
				     o.c_str(), v ? " " : "", v ? v : "");
			return usage(false);
		}
		i++;
	}
	if (a.check && !a.epochs_set)
		a.epochs = 1;
	if (a.check && !a.subset_set)
		a.subset = 6000;
	if (!a.threads) {
		unsigned c = std::thread::hardware_concurrency();
		a.threads = c ? c : 1;
	}
	return 0;
}

void add(Pass &sum, const Pass &p)
{
	sum.seconds += p.seconds;
	sum.waited += p.waited;
	sum.cpu += p.cpu;
	sum.batches += p.batches;
}

void row(unsigned epoch, const char *loader, const Pass &p, double acc)
{
	std::printf("%5u  %-9s  %10.4f  %8.4f  %9.1f  %8.2f  %5.2f\n", epoch,
		    loader, p.loss, acc, (double)p.batches / p.seconds,
		    p.waited, p.cpu);
	std::fflush(stdout);
}

int run(const Args &a)
{
	Split train, test;
	if (!load_split(a.data, "train", 60000, train) ||
	    !load_split(a.data, "t10k", 10000, test)) {
		std::fprintf(stderr, "example_libtorch_train: no Fashion-MNIST "
				     "IDX files in %s (apt-get install "
				     "dataset-fashion-mnist): skipped\n",
			     a.data.c_str());
		return 77;
	}
	size_t n = a.subset ? a.subset : train.n;
	TestSet test_set = make_test_set(test);

	/* libtorch's side reads the same bytes from files of its own. */
	std::unique_ptr<TorchData> torch_data;
	{
		TempDir dir;
		dir.write("train-images-idx3-ubyte", train.image_file);
		dir.write("train-labels-idx1-ubyte", train.label_file);
		torch_data = std::make_unique<TorchData>(
			torch::data::datasets::MNIST(dir.path)
				.map(torch::data::transforms::Normalize<>(
					kMean, kStd))
				.map(torch::data::transforms::Stack<>()));
	}
	auto loader = torch::data::make_data_loader(
		std::move(*torch_data), torch::data::samplers::RandomSampler(n),
		torch::data::DataLoaderOptions()
			.batch_size(kBatch)
			.workers(a.threads));

	eachobs_pool *pool_raw;
	int rc = eachobs_pool_create(&pool_raw, a.threads);
	if (rc < 0)
		fail(std::string("eachobs_pool_create: ") +
		     eachobs_last_error());
	std::unique_ptr<eachobs_pool, PoolDestroyer> pool(pool_raw);
	Feed f{ { &train, n }, pool.get(), a.threads, a.seed, {}, {}, {} };

	Model ours(a.seed), theirs(a.seed);
	auto pa = ours.net->parameters(), pb = theirs.net->parameters();
	for (size_t i = 0; i < pa.size(); i++)
		if (!pa[i].equal(pb[i]))
			fail("the two models do not start from the same "
			     "weights");

	std::printf("# Fashion-MNIST from %s: training on %zu of %zu images, "
		    "testing on %zu\n# MLP 784-256-10, Adam (lr 0.001), "
		    "batches of %zu, seed %llu; %u loader thread(s),\n# "
		    "%d torch thread(s); the same initial weights for both\n",
		    a.data.c_str(), n, train.n, test.n, kBatch, a.seed,
		    a.threads, at::get_num_threads());
	std::printf("%5s  %-9s  %10s  %8s  %9s  %8s  %5s\n", "epoch", "loader",
		    "train-loss", "test-acc", "batches/s", "waited-s", "cpu-s");
	std::fflush(stdout);
	/* Epoch 0: the untrained models (chance is 0.1); this first pass
	 * also starts BLAS's threads, before anything is timed. */
	double acc_ours = accuracy(ours, test_set);
	double acc_theirs = accuracy(theirs, test_set);
	std::printf("%5u  %-9s  %10s  %8.4f\n", 0u, "(none)", "", acc_ours);
	Pass all_ours, all_theirs;
	for (unsigned e = 0; e < a.epochs; e++) {
		Pass p = pass_eachobs(f, e, &ours);
		acc_ours = accuracy(ours, test_set);
		row(e + 1, "eachobs", p, acc_ours);
		add(all_ours, p);
		p = pass_torch(*loader, n, &theirs);
		acc_theirs = accuracy(theirs, test_set);
		row(e + 1, "libtorch", p, acc_theirs);
		add(all_theirs, p);
	}
	std::printf("# all epochs: eachobs %.1f batches/s, waited %.2f s, "
		    "%.2f cpu-s;\n# libtorch %.1f batches/s, waited %.2f s, "
		    "%.2f cpu-s\n",
		    (double)all_ours.batches / all_ours.seconds,
		    all_ours.waited, all_ours.cpu,
		    (double)all_theirs.batches / all_theirs.seconds,
		    all_theirs.waited, all_theirs.cpu);
	Pass alone_ours = pass_eachobs(f, a.epochs, nullptr);
	Pass alone_theirs = pass_torch(*loader, n, nullptr);
	std::printf("# each loader alone, one pass without training: eachobs "
		    "%.0f batches/s (%.2f cpu-s),\n# libtorch %.0f batches/s "
		    "(%.2f cpu-s)\n",
		    (double)alone_ours.batches / alone_ours.seconds,
		    alone_ours.cpu,
		    (double)alone_theirs.batches / alone_theirs.seconds,
		    alone_theirs.cpu);
	std::printf("# checks held: %llu batches from eachobs, each two tensors "
		    "over its batch buffer (no copy);\n# %llu tensors made, "
		    "%llu deleted, every batch given back; every image once "
		    "an epoch\n",
		    (unsigned long long)f.batches,
		    (unsigned long long)f.counts.made.load(),
		    (unsigned long long)f.counts.deleted.load());
	if (a.check && (acc_ours <= kCheckAccuracy ||
			acc_theirs <= kCheckAccuracy)) {
		std::fprintf(stderr, "example_libtorch_train: test accuracy "
				     "%.4f (eachobs) and %.4f (libtorch): "
				     "both must pass %.1f\n",
			     acc_ours, acc_theirs, kCheckAccuracy);
		return 1;
	}
	if (a.check)
		std::printf("OK\n");
	return 0;
}

} // namespace

int main(int argc, char **argv)
{
	Args a;
	int rc = parse(argc, argv, a);
	if (rc != 0)
		return rc < 0 ? 0 : rc;
	try {
		return run(a);
	} catch (const std::exception &e) {
		std::fprintf(stderr, "example_libtorch_train: %s\n", e.what());
		return 1;
	}
}
