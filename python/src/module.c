/*
 * eachobs._eachobs: the C library's iterator and pool as Python objects.
 *
 * A Loader is one epoch: it starts an eachobs iterator over a Python
 * dataset (a getobs that takes the GIL around dataset[idx] and writes the
 * sample into its fields, sample.c) or a native one (the user's C getobs,
 * which never takes the GIL), and yields each batch as DLPack capsules,
 * one per field, over the batch buffer: the batch goes back to the loader
 * when the last tensor made of them is freed, on any thread.
 *
 * The GIL: released around every call into the library that can wait
 * (start, next, close); a loader thread takes it only around a Python
 * getobs. Our own state shared between threads (the failures a getobs
 * kept, the ticker) has its own mutex, never the GIL.
 *
 * Ctrl-C: Python runs signal handlers on the main thread between
 * bytecodes, never while it waits in C. While the consumer waits, a ticker
 * thread calls eachobs_interrupt() every TICK_MS, so the wait returns
 * -EINTR and the consumer runs PyErr_CheckSignals() before waiting again.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "sample.h"

#include <dlpack/dlpack.h>
#include <eachobs.h>
#include <eachobs_dlpack.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { TICK_MS = 20 };

static PyObject *LoaderError, *HoldError;

/* ---- Pool: persistent threads that loaders borrow ------------------- */

typedef struct {
	PyObject_HEAD
	eachobs_pool *pool;
	uint64_t gen;            /* worker_init_fn runs once per thread */
	atomic_uint next_worker; /* the ids worker_init_fn receives */
} Pool;

static atomic_ullong generations = 1;

static int Pool_init(Pool *self, PyObject *args, PyObject *kw)
{
	static char *names[] = { "nthreads", NULL };
	unsigned nthreads;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "I", names, &nthreads))
		return -1;
	if (self->pool) {
		PyErr_SetString(PyExc_RuntimeError, "Pool: already made");
		return -1;
	}
	Py_BEGIN_ALLOW_THREADS
	rc = eachobs_pool_create(&self->pool, nthreads);
	Py_END_ALLOW_THREADS
	if (rc < 0) {
		PyErr_Format(rc == -EINVAL ? PyExc_ValueError : PyExc_OSError,
			     "eachobs pool of %u threads: %s", nthreads,
			     eachobs_last_error());
		return -1;
	}
	self->gen = atomic_fetch_add(&generations, 1);
	return 0;
}

static void Pool_dealloc(Pool *self)
{
	eachobs_pool *p = self->pool;

	self->pool = NULL;
	Py_BEGIN_ALLOW_THREADS
	eachobs_pool_destroy(p);
	Py_END_ALLOW_THREADS
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject PoolType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "eachobs._eachobs.Pool",
	.tp_basicsize = sizeof(Pool),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "Persistent loader threads (eachobs_pool).",
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)Pool_init,
	.tp_dealloc = (destructor)Pool_dealloc,
};

/* ---- Leaf: one field's tensor, for numpy's from_dlpack --------------- */

typedef struct {
	PyObject_HEAD
	PyObject *capsule;
} Leaf;

static void capsule_destructor(PyObject *cap)
{
	/* Renamed "used_dltensor" by the framework that took it over. */
	if (PyCapsule_IsValid(cap, "dltensor")) {
		DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
		if (m && m->deleter)
			m->deleter(m);
	}
}

static PyObject *Leaf_dlpack(Leaf *self, PyObject *args, PyObject *kw)
{
	(void)args;
	(void)kw;
	if (!self->capsule) {
		PyErr_SetString(PyExc_BufferError, "__dlpack__: taken already");
		return NULL;
	}
	PyObject *c = self->capsule;
	self->capsule = NULL;
	return c;
}

static PyObject *Leaf_device(Leaf *self, PyObject *unused)
{
	(void)self;
	(void)unused;
	return Py_BuildValue("(ii)", (int)kDLCPU, 0);
}

static void Leaf_dealloc(Leaf *self)
{
	Py_XDECREF(self->capsule);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef Leaf_methods[] = {
	{ "__dlpack__", (PyCFunction)(void (*)(void))Leaf_dlpack,
	  METH_VARARGS | METH_KEYWORDS, "The capsule, once." },
	{ "__dlpack_device__", (PyCFunction)Leaf_device, METH_NOARGS,
	  "CPU memory." },
	{ NULL, NULL, 0, NULL },
};

static PyTypeObject LeafType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "eachobs._eachobs.Leaf",
	.tp_basicsize = sizeof(Leaf),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "A field of a batch, for numpy.from_dlpack.",
	.tp_dealloc = (destructor)Leaf_dealloc,
	.tp_methods = Leaf_methods,
};

/* ---- Loader: one epoch ---------------------------------------------- */

/*
 * The buffers of one loader, from its allocator: recorded for data_ptr
 * checks and, with collate_fn, for the sample references left in them at
 * the end. Blocks that DLPack tensors still use are freed by the last
 * deleter, maybe after the Loader is gone, on any thread: so this state
 * has its own count (the Loader's reference and one per live block) and
 * lock, and is freed by whoever drops the last.
 */
struct block {
	void *ptr;
	size_t size;
	PyObject *keep; /* pin_memory: what owns the pinned memory */
};

struct buffers {
	pthread_mutex_t lock;
	atomic_uint refs;
	bool collate;        /* blocks hold sample references */
	PyObject *pin_alloc; /* not NULL: alloc(size) -> (address, owner) */
	struct block blocks[4];
	unsigned nblocks;
};

static struct buffers *buffers_new(bool collate, PyObject *pin_alloc)
{
	struct buffers *B = calloc(1, sizeof(*B));

	if (!B)
		return NULL;
	pthread_mutex_init(&B->lock, NULL);
	atomic_init(&B->refs, 1);
	B->collate = collate;
	Py_XINCREF(pin_alloc);
	B->pin_alloc = pin_alloc;
	return B;
}

/* Drop a reference; under the GIL when gil is true. */
static void buffers_unref(struct buffers *B, bool gil)
{
	if (!B || atomic_fetch_sub(&B->refs, 1) != 1)
		return;
	if (B->pin_alloc) {
		PyGILState_STATE g = gil ? PyGILState_UNLOCKED
					 : PyGILState_Ensure();
		Py_CLEAR(B->pin_alloc);
		if (!gil)
			PyGILState_Release(g);
	}
	pthread_mutex_destroy(&B->lock);
	free(B);
}

typedef struct {
	PyObject_HEAD
	_Atomic(eachobs_iter *) it;
	PyObject *dataset;   /* NULL: native getobs */
	PyObject *collate;   /* not NULL: slots hold sample references */
	PyObject *worker_init;
	struct buffers *buffers;
	Pool *pool;
	struct plan plan;
	size_t n, batchsize, nfields;
	size_t fields[EACHOBS_MAX_FIELDS];
	eachobs_dlpack_field specs[EACHOBS_MAX_FIELDS];
	unsigned hold;
	bool skip;
	uint64_t init_gen;
	atomic_uint own_next_worker;
	atomic_uint *next_worker;
	Py_buffer indices;   /* .obj NULL: none */
	/* The failures of Python getobs under STOP: index -> exception, and
	 * an interpreter-level one (KeyboardInterrupt) that ends the epoch. */
	pthread_mutex_t lock;
	PyObject *failures;
	PyObject *fatal;
	bool inited;
	/* The ticker. */
	pthread_t ticker;
	bool ticker_started, ticker_quit; /* under lock */
	atomic_bool ticking;  /* the consumer waits in the library */
	atomic_bool ticker_idle; /* the ticker sleeps untimed */
	pthread_cond_t tick;
	/* The consumer is taking the GIL back: loader threads let it have it
	 * before they take it again (see gil_for_consumer). */
	atomic_bool consumer_wants_gil;
	atomic_uint gil_waiters;
	pthread_mutex_t gil_lock;
	pthread_cond_t gil_free;
	bool closed;
	/* The library's consumer calls must not overlap: a Python thread in
	 * next() (or checkpoint, stats) holds `busy`; a close from another
	 * thread sets `closing`, interrupts it and waits on `idle`. */
	atomic_bool busy, closing;
	pthread_cond_t idle;
} Loader;

static _Thread_local uint64_t thread_init_gen;

/* numobs runs once, inside eachobs_parallel, on its thread; ctx is the
 * user's for a native getobs, so the count comes this way. */
static _Thread_local size_t starting_n;

static size_t numobs_cb(void *ctx)
{
	(void)ctx;
	return starting_n;
}

/* worker_init_fn(id) once per thread (per pool with persistent threads):
 * 0, or -1 with its exception. */
static int run_worker_init(Loader *L)
{
	if (!L->worker_init || thread_init_gen == L->init_gen)
		return 0;
	thread_init_gen = L->init_gen;
	unsigned id = atomic_fetch_add(L->next_worker, 1);
	PyObject *r = PyObject_CallFunction(L->worker_init, "I", id);
	Py_XDECREF(r);
	return r ? 0 : -1;
}

/* The exception a getobs raised: kept for the consumer (STOP), counted
 * by the library (SKIP), or, for one that is not an Exception
 * (KeyboardInterrupt, SystemExit), kept to end the epoch with. */
static int getobs_failed(Loader *L, size_t idx)
{
	PyObject *type, *value, *tb;

	PyErr_Fetch(&type, &value, &tb);
	PyErr_NormalizeException(&type, &value, &tb);
	if (tb)
		PyException_SetTraceback(value, tb);
	PyObject *note = PyUnicode_FromFormat("raised by dataset[%zu] on a "
					      "loader thread", idx);
	if (note) {
		PyObject *r = PyObject_CallMethod(value, "add_note", "O", note);
		Py_XDECREF(r);
		Py_DECREF(note);
	}
	PyErr_Clear();
	bool fatal = !PyErr_GivenExceptionMatches(type, PyExc_Exception);
	pthread_mutex_lock(&L->lock);
	if (fatal && !L->fatal) {
		L->fatal = value;
		value = NULL;
	} else if (!fatal && !L->skip && L->failures) {
		PyObject *key = PyLong_FromSize_t(idx);
		if (!key || PyDict_SetItem(L->failures, key, value) < 0)
			PyErr_Clear();
		Py_XDECREF(key);
	}
	pthread_mutex_unlock(&L->lock);
	Py_XDECREF(type);
	Py_XDECREF(value);
	Py_XDECREF(tb);
	if (fatal) {
		eachobs_iter *it = atomic_load(&L->it);
		if (it)
			eachobs_interrupt(it);
	}
	return -EIO;
}

/*
 * The GIL goes to the consumer first. A loader thread drops the GIL after
 * each sample and asks for it again at once; CPython hands it to a waiting
 * thread only after its switch interval (5 ms), so a consumer coming back
 * from the library would wait that long for each batch while loaders
 * take turns. So the consumer says it wants the GIL (consumer_wants_gil)
 * while it takes it, and a loader thread about to take it waits until the
 * consumer has it. The flag is cleared before the waiters are counted,
 * and a waiter counts itself before it reads the flag: one of the two
 * sees the other.
 */
static void gil_for_consumer(Loader *L)
{
	if (!atomic_load(&L->consumer_wants_gil))
		return;
	pthread_mutex_lock(&L->gil_lock);
	atomic_fetch_add(&L->gil_waiters, 1);
	while (atomic_load(&L->consumer_wants_gil))
		pthread_cond_wait(&L->gil_free, &L->gil_lock);
	atomic_fetch_sub(&L->gil_waiters, 1);
	pthread_mutex_unlock(&L->gil_lock);
}

/* The consumer has the GIL again. */
static void consumer_has_gil(Loader *L)
{
	atomic_store(&L->consumer_wants_gil, false);
	if (!atomic_load(&L->gil_waiters))
		return;
	pthread_mutex_lock(&L->gil_lock);
	pthread_cond_broadcast(&L->gil_free);
	pthread_mutex_unlock(&L->gil_lock);
}

/*
 * A Python thread state for each loader thread. PyGILState_Ensure on a
 * thread without one makes one, and the matching Release destroys it: a
 * few microseconds per sample, more than a small __getitem__ costs. So a
 * thread of the library keeps the one its first getobs made (its `outer`
 * Ensure is never released while it loads) and takes the GIL with it;
 * the thread's exit destroys it (thread_exit, a pthread key destructor:
 * pool threads exit when their pool does, an iterator's at its close,
 * which waits with the GIL released). A thread that had a state of its
 * own (the consumer, under THREADED and SERIAL) uses Ensure and Release,
 * which then only take and drop the GIL.
 */
struct thread_py {
	PyGILState_STATE outer;
	PyThreadState *saved; /* NULL while this thread holds the GIL */
};

static pthread_key_t thread_py_key;
static _Thread_local struct thread_py *thread_py;

static int finalizing(void)
{
#if PY_VERSION_HEX >= 0x030D0000
	return Py_IsFinalizing();
#else
	return _Py_IsFinalizing();
#endif
}

static void thread_exit(void *p)
{
	struct thread_py *t = p;

	/* Not PyGILState_Release: the thread's exit may have cleared the key
	 * it finds the state by before this destructor runs. */
	if (t->saved && Py_IsInitialized() && !finalizing()) {
		PyEval_RestoreThread(t->saved);
		PyThreadState_Clear(t->saved);
		PyThreadState_DeleteCurrent(); /* and drops the GIL */
	}
	free(t);
}

/* Take the GIL on a loader thread: PyGILState_STATE for the threads with
 * their own state, or -1 for ours. */
static int py_enter(void)
{
	struct thread_py *t = thread_py;

	if (t) {
		PyEval_RestoreThread(t->saved);
		t->saved = NULL;
		return -1;
	}
	if (PyGILState_GetThisThreadState())
		return (int)PyGILState_Ensure();
	t = calloc(1, sizeof(*t));
	if (!t || pthread_setspecific(thread_py_key, t) != 0) {
		free(t);
		return (int)PyGILState_Ensure(); /* the slow way, still right */
	}
	t->outer = PyGILState_Ensure();
	thread_py = t;
	return -1;
}

static void py_leave(int g)
{
	if (g == -1)
		thread_py->saved = PyEval_SaveThread();
	else
		PyGILState_Release((PyGILState_STATE)g);
}

static int py_getobs(void *ctx, size_t idx, void *obs)
{
	Loader *L = ctx;

	gil_for_consumer(L);
	int g = py_enter();
	int rc = run_worker_init(L);
	PyObject *sample = NULL;

	if (rc == 0) {
		PyObject *key = PyLong_FromSize_t(idx);
		sample = key ? PyObject_GetItem(L->dataset, key) : NULL;
		Py_XDECREF(key);
	}
	if (!sample)
		rc = -1;
	else if (L->collate)
		memcpy(obs, &sample, sizeof(sample)); /* the slot owns it */
	else
		rc = plan_write(&L->plan, sample, idx, obs);
	if (!L->collate)
		Py_XDECREF(sample);
	if (rc < 0)
		rc = getobs_failed(L, idx);
	py_leave(g);
	return rc;
}

/* Buffers: aligned, zeroed (with collate_fn, a slot of NULLs holds no
 * reference), recorded. Runs inside eachobs_parallel, GIL released. */
static void *alloc_cb(void *ctx, size_t size, size_t align)
{
	struct buffers *B = ctx;
	void *p = NULL;
	PyObject *keep = NULL;

	if (B->nblocks == sizeof(B->blocks) / sizeof(B->blocks[0]))
		return NULL;
	if (B->pin_alloc) {
		PyGILState_STATE g = PyGILState_Ensure();
		PyObject *r = PyObject_CallFunction(B->pin_alloc, "n",
						    (Py_ssize_t)(size + align));
		unsigned long long addr = 0;
		if (r && PyArg_ParseTuple(r, "KO", &addr, &keep) && addr) {
			Py_INCREF(keep);
			p = (void *)(((uintptr_t)addr + align - 1) &
				     ~(uintptr_t)(align - 1));
			memset(p, 0, size);
		} else {
			PyErr_WriteUnraisable(B->pin_alloc);
		}
		Py_XDECREF(r);
		PyGILState_Release(g);
	} else if (posix_memalign(&p, align, size) == 0) {
		memset(p, 0, size);
	} else {
		p = NULL;
	}
	if (!p)
		return NULL;
	pthread_mutex_lock(&B->lock);
	B->blocks[B->nblocks++] = (struct block){ p, size, keep };
	pthread_mutex_unlock(&B->lock);
	atomic_fetch_add(&B->refs, 1);
	return p;
}

/* With collate_fn: the references still in slots nobody took. */
static void drop_references(void *ptr, size_t size)
{
	PyObject **o = ptr;

	for (size_t i = 0; i < size / sizeof(*o); i++)
		Py_CLEAR(o[i]);
}

/* In eachobs_close (GIL released), or in the last DLPack deleter, on any
 * thread, GIL held or not. */
static void free_cb(void *ctx, void *ptr, size_t size)
{
	struct buffers *B = ctx;
	struct block b = { 0 };

	pthread_mutex_lock(&B->lock);
	for (unsigned i = 0; i < B->nblocks; i++)
		if (B->blocks[i].ptr == ptr) {
			b = B->blocks[i];
			B->blocks[i] = B->blocks[--B->nblocks];
			break;
		}
	pthread_mutex_unlock(&B->lock);
	if (!b.ptr)
		return;
	if ((B->collate || b.keep) && Py_IsInitialized()) {
		PyGILState_STATE g = PyGILState_Ensure();
		if (B->collate)
			drop_references(ptr, size);
		Py_CLEAR(b.keep);
		PyGILState_Release(g);
	}
	if (!B->pin_alloc)
		free(ptr);
	buffers_unref(B, false);
}

/* ---- the ticker ---------------------------------------------------- */

/*
 * While the consumer waits in the library, interrupt it every TICK_MS so
 * that it can run Python's signal handlers. The consumer only sets
 * `ticking` (an atomic store per call); the ticker sleeps untimed once it
 * finds it clear, and the consumer signals it only then, so a loop that
 * calls next() often costs no wake-ups.
 */
static void *ticker_main(void *arg)
{
	Loader *L = arg;

	pthread_mutex_lock(&L->lock);
	while (!L->ticker_quit) {
		if (!atomic_load(&L->ticking)) {
			/* idle, then ticking read again: a consumer that set
			 * ticking after the first read sees idle and signals
			 * (under the lock, so once this waits). */
			atomic_store(&L->ticker_idle, true);
			if (!atomic_load(&L->ticking))
				pthread_cond_wait(&L->tick, &L->lock);
			atomic_store(&L->ticker_idle, false);
			continue;
		}
		struct timespec t;
		clock_gettime(CLOCK_REALTIME, &t);
		t.tv_nsec += TICK_MS * 1000000L;
		if (t.tv_nsec >= 1000000000L) {
			t.tv_sec++;
			t.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&L->tick, &L->lock, &t);
		eachobs_iter *it = atomic_load(&L->it);
		if (atomic_load(&L->ticking) && it)
			eachobs_interrupt(it);
	}
	pthread_mutex_unlock(&L->lock);
	return NULL;
}

static void ticker_set(Loader *L, bool on)
{
	atomic_store(&L->ticking, on);
	if (!on || !atomic_load(&L->ticker_idle))
		return;
	pthread_mutex_lock(&L->lock);
	pthread_cond_signal(&L->tick);
	pthread_mutex_unlock(&L->lock);
}

static void ticker_stop(Loader *L)
{
	if (!L->ticker_started)
		return;
	pthread_mutex_lock(&L->lock);
	L->ticker_quit = true;
	pthread_cond_signal(&L->tick);
	pthread_mutex_unlock(&L->lock);
	pthread_join(L->ticker, NULL);
	L->ticker_started = false;
}

/* ---- start ---------------------------------------------------------- */

static int parse_fields(Loader *L, PyObject *fields, PyObject *specs)
{
	Py_ssize_t nf = PySequence_Length(fields);

	if (nf < 1 || nf > (Py_ssize_t)EACHOBS_MAX_FIELDS ||
	    PySequence_Length(specs) != nf) {
		if (!PyErr_Occurred())
			PyErr_Format(PyExc_ValueError, "a sample has %zd leaves;"
				     " 1 to %u are supported", nf,
				     EACHOBS_MAX_FIELDS);
		return -1;
	}
	L->nfields = (size_t)nf;
	for (Py_ssize_t k = 0; k < nf; k++) {
		PyObject *f = PySequence_GetItem(fields, k);
		PyObject *s = PySequence_GetItem(specs, k), *shape;
		eachobs_dlpack_field *d = &L->specs[k];
		int code, bits;
		L->fields[k] = f ? PyLong_AsSize_t(f) : (size_t)-1;
		int ok = s && PyArg_ParseTuple(s, "iiO!", &code, &bits,
					       &PyTuple_Type, &shape);
		Py_XDECREF(f);
		Py_XDECREF(s);
		if (!ok || PyErr_Occurred())
			return -1;
		d->dtype = (DLDataType){ (uint8_t)code, (uint8_t)bits, 1 };
		d->ndim = (int)PyTuple_GET_SIZE(shape);
		if (d->ndim > EACHOBS_DLPACK_MAX_NDIM) {
			PyErr_SetString(PyExc_ValueError, "a leaf has more than 8 "
					"dimensions");
			return -1;
		}
		for (int j = 0; j < d->ndim; j++)
			d->shape[j] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, j));
		if (PyErr_Occurred())
			return -1;
	}
	return 0;
}

static PyObject *raise_start(int rc)
{
	PyObject *t = rc == -EINVAL ? PyExc_ValueError
		      : rc == -ENOMEM ? PyExc_MemoryError
				      : PyExc_OSError;
	PyErr_Format(t, "%s", eachobs_last_error());
	return NULL;
}

static int Loader_init(Loader *L, PyObject *args, PyObject *kw)
{
	static char *names[] = {
		"dataset", "numobs", "getobs", "ctx", "plan", "fields",
		"specs", "tensor_type", "collate", "batchsize", "executor",
		"ordered", "nthreads", "buffersize", "hold", "skip",
		"indices", "shuffle", "seed", "epoch", "shard_index",
		"shard_count", "drop_last", "resume", "pool", "worker_init",
		"pin_alloc", NULL };
	PyObject *dataset, *plan, *fields, *specs, *tensor_type, *collate;
	PyObject *indices, *resume, *pool, *worker_init, *pin_alloc;
	unsigned long long getobs_addr, ctx_addr, seed, epoch;
	Py_ssize_t numobs, batchsize, buffersize;
	int executor, ordered, skip, shuffle, drop_last;
	unsigned nthreads, hold, shard_index, shard_count;

	if (L->failures) {
		PyErr_SetString(PyExc_RuntimeError, "Loader: started already");
		return -1;
	}
	if (!PyArg_ParseTupleAndKeywords(
		    args, kw, "OnKKOOOOOnipInIpOpKKIIpOOOO", names, &dataset,
		    &numobs, &getobs_addr, &ctx_addr, &plan, &fields, &specs,
		    &tensor_type, &collate, &batchsize, &executor, &ordered,
		    &nthreads, &buffersize, &hold, &skip, &indices, &shuffle,
		    &seed, &epoch, &shard_index, &shard_count, &drop_last,
		    &resume, &pool, &worker_init, &pin_alloc))
		return -1;
	pthread_mutex_init(&L->lock, NULL);
	pthread_cond_init(&L->tick, NULL);
	pthread_mutex_init(&L->gil_lock, NULL);
	pthread_cond_init(&L->gil_free, NULL);
	pthread_cond_init(&L->idle, NULL);
	L->inited = true;
	L->failures = PyDict_New();
	if (!L->failures)
		return -1;
	L->n = (size_t)numobs;
	L->batchsize = (size_t)batchsize;
	L->hold = hold;
	L->skip = skip;
	if (collate != Py_None) {
		Py_INCREF(collate);
		L->collate = collate;
		L->nfields = 1;
		L->fields[0] = sizeof(PyObject *);
	} else if (parse_fields(L, fields, specs) < 0) {
		return -1;
	}
	if (!getobs_addr) {
		Py_INCREF(dataset);
		L->dataset = dataset;
		if (!L->collate &&
		    plan_init(&L->plan, plan, tensor_type) < 0)
			return -1;
	}
	if (worker_init != Py_None) {
		Py_INCREF(worker_init);
		L->worker_init = worker_init;
	}
	L->buffers = buffers_new(collate != Py_None,
				 pin_alloc == Py_None ? NULL : pin_alloc);
	if (!L->buffers) {
		PyErr_NoMemory();
		return -1;
	}
	if (pool != Py_None) {
		if (!PyObject_TypeCheck(pool, &PoolType)) {
			PyErr_SetString(PyExc_TypeError, "pool: a Pool");
			return -1;
		}
		Py_INCREF(pool);
		L->pool = (Pool *)pool;
		L->init_gen = L->pool->gen;
		L->next_worker = &L->pool->next_worker;
	} else {
		L->init_gen = atomic_fetch_add(&generations, 1);
		L->next_worker = &L->own_next_worker;
	}
	if (indices != Py_None &&
	    PyObject_GetBuffer(indices, &L->indices, PyBUF_C_CONTIGUOUS) < 0)
		return -1;
	Py_buffer res = { 0 };
	if (resume != Py_None &&
	    PyObject_GetBuffer(resume, &res, PyBUF_C_CONTIGUOUS) < 0)
		return -1;

	eachobs_dataset data = {
		.ctx = getobs_addr ? (void *)(uintptr_t)ctx_addr : (void *)L,
		.numobs = numobs_cb,
		.getobs = getobs_addr
				  ? (int (*)(void *, size_t, void *))(uintptr_t)
					    getobs_addr
				  : py_getobs,
		.obs_size = 0,
	};
	for (size_t k = 0; k < L->nfields; k++)
		data.obs_size += L->fields[k];
	eachobs_allocator a = { alloc_cb, free_cb, L->buffers };
	eachobs_options o = {
		.nthreads = nthreads,
		.buffersize = (size_t)buffersize,
		.executor = (eachobs_executor)executor,
		.ordered = ordered,
		.on_error = skip ? EACHOBS_ON_ERROR_SKIP
				 : EACHOBS_ON_ERROR_STOP,
		.batchsize = L->batchsize,
		.drop_last = drop_last,
		.hold = hold,
		.pool = L->pool ? L->pool->pool : NULL,
		.indices = L->indices.obj ? L->indices.buf : NULL,
		.nindices = L->indices.obj ? (size_t)L->indices.len /
						     sizeof(size_t)
					   : 0,
		.shuffle = shuffle,
		.seed = seed,
		.epoch = epoch,
		.shard_index = shard_index,
		.shard_count = shard_count,
		.resume = res.obj ? res.buf : NULL,
		.resume_len = res.obj ? (size_t)res.len : 0,
		.allocator = &a,
		.fields = L->nfields > 1 ? L->fields : NULL,
		.nfields = L->nfields > 1 ? L->nfields : 0,
	};
	eachobs_iter *it = NULL;
	int rc;
	Py_BEGIN_ALLOW_THREADS
	starting_n = L->n;
	rc = eachobs_parallel(&it, &data, &o);
	Py_END_ALLOW_THREADS
	if (res.obj)
		PyBuffer_Release(&res);
	if (rc < 0) {
		raise_start(rc);
		return -1;
	}
	atomic_store(&L->it, it);
	if (pthread_create(&L->ticker, NULL, ticker_main, L) == 0)
		L->ticker_started = true;
	return 0;
}

/* ---- next ----------------------------------------------------------- */

/* The epoch ended with an exception that is not an Exception
 * (KeyboardInterrupt from a getobs on the consumer's thread). */
static PyObject *raise_fatal(Loader *L)
{
	pthread_mutex_lock(&L->lock);
	PyObject *e = L->fatal;
	L->fatal = NULL;
	pthread_mutex_unlock(&L->lock);
	PyErr_SetObject((PyObject *)Py_TYPE(e), e);
	Py_DECREF(e);
	return NULL;
}

/* A getobs code: the exception the Python getobs kept for idx, or one
 * made of the code (a native getobs). */
static PyObject *raise_getobs(Loader *L, int rc, size_t idx)
{
	PyObject *key = PyLong_FromSize_t(idx), *e = NULL;

	if (!key)
		return NULL;
	pthread_mutex_lock(&L->lock);
	e = PyDict_GetItemWithError(L->failures, key);
	Py_XINCREF(e);
	pthread_mutex_unlock(&L->lock);
	Py_DECREF(key);
	if (e) {
		PyErr_SetObject((PyObject *)Py_TYPE(e), e);
		Py_DECREF(e);
		return NULL;
	}
	if (PyErr_Occurred())
		return NULL;
	PyErr_Format(PyExc_OSError, "getobs(%zu) returned %d: %s", idx, rc,
		     eachobs_strerror(rc));
	return NULL;
}

static PyObject *raise_next(Loader *L, int rc, size_t idx)
{
	if (rc == -ENOBUFS)
		return PyErr_Format(HoldError,
				    "%u batches of this loader are still alive "
				    "(tensors, or views of them), as many as "
				    "hold=%u allows: delete some before taking "
				    "the next, or make the loader with a larger "
				    "hold", L->hold, L->hold);
	if (rc == -EINVAL)
		return PyErr_Format(LoaderError, "%s", eachobs_last_error());
	return raise_getobs(L, rc, idx);
}

/* The item at data as one capsule per field. */
static PyObject *capsules(Loader *L, const void *data)
{
	DLManagedTensor *t[EACHOBS_MAX_FIELDS];
	eachobs_iter *it = atomic_load(&L->it);
	int rc = eachobs_dlpack_fields(it, data, L->specs, L->nfields, t);

	if (rc < 0) {
		eachobs_release(it, data);
		return PyErr_Format(LoaderError, "%s", eachobs_last_error());
	}
	PyObject *out = PyTuple_New((Py_ssize_t)L->nfields);
	for (size_t k = 0; k < L->nfields; k++) {
		PyObject *c = out ? PyCapsule_New(t[k], "dltensor",
						  capsule_destructor)
				  : NULL;
		if (!c) {
			/* The capsules made own theirs; the rest go now. */
			for (size_t j = k; j < L->nfields; j++)
				t[j]->deleter(t[j]);
			Py_XDECREF(out);
			return NULL;
		}
		PyTuple_SET_ITEM(out, (Py_ssize_t)k, c);
	}
	return out;
}

/* With collate_fn: the batch's samples as a list; the slot is let go. */
static PyObject *samples(Loader *L, void *data, size_t count)
{
	PyObject **o = data;
	PyObject *list = PyList_New((Py_ssize_t)count);

	if (!list)
		return NULL;
	for (size_t j = 0; j < count; j++)
		PyList_SET_ITEM(list, (Py_ssize_t)j, o[j]); /* stolen */
	/* Moved-down entries leave copies behind (on_error = SKIP). */
	memset(data, 0, (L->batchsize ? L->batchsize : 1) * sizeof(*o));
	eachobs_release(atomic_load(&L->it), data);
	return list;
}

/* Become the consumer: the iterator, or NULL with LoaderError. */
static eachobs_iter *consumer_enter(Loader *L, const char *what)
{
	eachobs_iter *it = atomic_load(&L->it);

	if (!it || L->closed || atomic_load(&L->closing)) {
		PyErr_Format(LoaderError, "%s: the loader is closed", what);
		return NULL;
	}
	if (atomic_exchange(&L->busy, true)) {
		PyErr_Format(LoaderError, "%s: another thread is in next() of "
			     "this loader; one thread at a time may iterate it",
			     what);
		return NULL;
	}
	return it;
}

static void consumer_leave(Loader *L)
{
	atomic_store(&L->busy, false);
	if (atomic_load(&L->closing)) {
		pthread_mutex_lock(&L->lock);
		pthread_cond_broadcast(&L->idle);
		pthread_mutex_unlock(&L->lock);
	}
}

static PyObject *next_item(Loader *L, eachobs_iter *it);

static PyObject *Loader_next(Loader *L, PyObject *unused)
{
	(void)unused;
	eachobs_iter *it = consumer_enter(L, "next");
	if (!it)
		return NULL;
	PyObject *r = next_item(L, it);
	consumer_leave(L);
	return r;
}

static PyObject *next_item(Loader *L, eachobs_iter *it)
{
	eachobs_batch b = { 0 };
	const void *obs = NULL;
	size_t idx = 0;
	int rc;

	for (;;) {
		ticker_set(L, true);
		Py_BEGIN_ALLOW_THREADS
		if (L->batchsize)
			rc = eachobs_next_batch(it, &b);
		else
			rc = eachobs_next(it, &obs, &idx);
		ticker_set(L, false);
		atomic_store(&L->consumer_wants_gil, true);
		Py_END_ALLOW_THREADS
		consumer_has_gil(L);
		if (L->fatal)
			return raise_fatal(L);
		if (rc != -EINTR)
			break;
		if (atomic_load(&L->closing))
			return PyErr_Format(LoaderError, "next: the loader was "
					    "closed by another thread");
		if (PyErr_CheckSignals() < 0)
			return NULL;
	}
	if (rc == 0)
		Py_RETURN_NONE;
	if (rc < 0)
		return raise_next(L, rc, L->batchsize ? (b.idx ? *b.idx : 0)
						      : idx);
	void *data = L->batchsize ? b.data : (void *)obs;
	if (L->collate)
		return samples(L, data, L->batchsize ? b.count : 1);
	return capsules(L, data);
}

/* Wait, GIL released, for a next() running on another thread to end:
 * it is interrupted until it sees `closing`. */
static void wait_for_consumer(Loader *L, eachobs_iter *it)
{
	atomic_store(&L->closing, true);
	if (!atomic_load(&L->busy))
		return;
	Py_BEGIN_ALLOW_THREADS
	pthread_mutex_lock(&L->lock);
	while (atomic_load(&L->busy)) {
		eachobs_interrupt(it);
		struct timespec t;
		clock_gettime(CLOCK_REALTIME, &t);
		t.tv_nsec += TICK_MS * 1000000L;
		if (t.tv_nsec >= 1000000000L) {
			t.tv_sec++;
			t.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&L->idle, &L->lock, &t);
	}
	pthread_mutex_unlock(&L->lock);
	Py_END_ALLOW_THREADS
}

static void loader_close(Loader *L)
{
	eachobs_iter *it = atomic_load(&L->it);

	if (it && L->inited)
		wait_for_consumer(L, it);
	it = atomic_exchange(&L->it, NULL);
	L->closed = true;
	ticker_stop(L);
	if (it) {
		Py_BEGIN_ALLOW_THREADS
		eachobs_close(it);
		Py_END_ALLOW_THREADS
	}
}

static PyObject *Loader_close(Loader *L, PyObject *unused)
{
	(void)unused;
	loader_close(L);
	Py_RETURN_NONE;
}

static PyObject *Loader_length(Loader *L, PyObject *unused)
{
	(void)unused;
	return PyLong_FromSize_t(eachobs_length(atomic_load(&L->it)));
}

static PyObject *Loader_checkpoint(Loader *L, PyObject *unused)
{
	size_t len = 0;

	(void)unused;
	eachobs_iter *it = consumer_enter(L, "checkpoint");
	if (!it)
		return NULL;
	int rc = eachobs_checkpoint(it, NULL, &len);
	PyObject *out = rc == -ENOSPC || rc == 0
				? PyBytes_FromStringAndSize(NULL, (Py_ssize_t)len)
				: PyErr_Format(LoaderError, "%s",
					       eachobs_last_error());
	if (out && eachobs_checkpoint(it, PyBytes_AS_STRING(out), &len) < 0)
		Py_SETREF(out, PyErr_Format(LoaderError, "%s",
					    eachobs_last_error()));
	consumer_leave(L);
	return out;
}

static PyObject *Loader_stats(Loader *L, PyObject *unused)
{
	eachobs_stats s;

	(void)unused;
	eachobs_iter *it = consumer_enter(L, "stats");
	if (!it)
		return NULL;
	eachobs_get_stats(it, &s);
	consumer_leave(L);
	return Py_BuildValue(
		"{sKsKsKsKsKsKsKsKsKsKsnsIsK}", "yielded", s.yielded,
		"batches", s.batches, "skipped", s.skipped, "loaded", s.loaded,
		"loaded_by_consumer", s.loaded_by_consumer, "consumer_wait_ns",
		s.consumer_wait_ns, "consumer_getobs_ns", s.consumer_getobs_ns,
		"worker_getobs_ns", s.worker_getobs_ns, "worker_idle_ns",
		s.worker_idle_ns, "steals", s.steals, "max_waiting",
		(Py_ssize_t)s.max_waiting, "nworkers", s.nworkers, "failures",
		s.skipped);
}

static PyObject *Loader_blocks(Loader *L, PyObject *unused)
{
	struct buffers *B = L->buffers;
	PyObject *out = PyList_New(0);

	(void)unused;
	if (!B)
		return out;
	pthread_mutex_lock(&B->lock);
	for (unsigned i = 0; out && i < B->nblocks; i++) {
		PyObject *t = Py_BuildValue("(Kn)",
					    (unsigned long long)(uintptr_t)
						    B->blocks[i].ptr,
					    (Py_ssize_t)B->blocks[i].size);
		if (!t || PyList_Append(out, t) < 0)
			Py_CLEAR(out);
		Py_XDECREF(t);
	}
	pthread_mutex_unlock(&B->lock);
	return out;
}

static int Loader_traverse(Loader *L, visitproc visit, void *arg)
{
	Py_VISIT(L->dataset);
	Py_VISIT(L->collate);
	Py_VISIT(L->worker_init);
	return 0;
}

static void Loader_dealloc(Loader *L)
{
	PyObject_GC_UnTrack(L);
	loader_close(L);
	if (L->indices.obj)
		PyBuffer_Release(&L->indices);
	plan_fini(&L->plan);
	Py_CLEAR(L->dataset);
	Py_CLEAR(L->collate);
	Py_CLEAR(L->worker_init);
	Py_CLEAR(L->pool);
	Py_CLEAR(L->failures);
	Py_CLEAR(L->fatal);
	buffers_unref(L->buffers, true);
	if (L->inited) {
		pthread_cond_destroy(&L->tick);
		pthread_mutex_destroy(&L->lock);
		pthread_cond_destroy(&L->gil_free);
		pthread_cond_destroy(&L->idle);
		pthread_mutex_destroy(&L->gil_lock);
	}
	Py_TYPE(L)->tp_free((PyObject *)L);
}

static PyMethodDef Loader_methods[] = {
	{ "next", (PyCFunction)Loader_next, METH_NOARGS,
	  "The next item's capsules (with collate: its samples), None at "
	  "the end." },
	{ "close", (PyCFunction)Loader_close, METH_NOARGS, "Stop and free." },
	{ "length", (PyCFunction)Loader_length, METH_NOARGS,
	  "Items the epoch yields (eachobs_length)." },
	{ "checkpoint", (PyCFunction)Loader_checkpoint, METH_NOARGS,
	  "eachobs_checkpoint, as bytes." },
	{ "stats", (PyCFunction)Loader_stats, METH_NOARGS,
	  "eachobs_get_stats, as a dict." },
	{ "blocks", (PyCFunction)Loader_blocks, METH_NOARGS,
	  "(address, size) of each buffer block." },
	{ NULL, NULL, 0, NULL },
};

static PyTypeObject LoaderType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "eachobs._eachobs.Loader",
	.tp_basicsize = sizeof(Loader),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
	.tp_doc = "One epoch of an eachobs iterator.",
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)Loader_init,
	.tp_dealloc = (destructor)Loader_dealloc,
	.tp_traverse = (traverseproc)Loader_traverse,
	.tp_methods = Loader_methods,
};

/* ---- the module ---------------------------------------------------- */

static PyObject *make_leaf(PyObject *mod, PyObject *cap)
{
	(void)mod;
	Leaf *l = PyObject_New(Leaf, &LeafType);

	if (!l)
		return NULL;
	Py_INCREF(cap);
	l->capsule = cap;
	return (PyObject *)l;
}

static PyMethodDef module_methods[] = {
	{ "leaf", make_leaf, METH_O,
	  "An object with __dlpack__ over a capsule (numpy.from_dlpack)." },
	{ NULL, NULL, 0, NULL },
};

static struct PyModuleDef module = {
	PyModuleDef_HEAD_INIT, "_eachobs",
	"The eachobs C library's iterator, for eachobs.DataLoader.", -1,
	module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__eachobs(void)
{
	if (pthread_key_create(&thread_py_key, thread_exit) != 0)
		return PyErr_NoMemory();
	if (PyType_Ready(&PoolType) < 0 || PyType_Ready(&LeafType) < 0 ||
	    PyType_Ready(&LoaderType) < 0)
		return NULL;
	PyObject *m = PyModule_Create(&module);
	if (!m)
		return NULL;
	LoaderError = PyErr_NewExceptionWithDoc(
		"eachobs.LoaderError",
		"The loader cannot do what was asked in its state.",
		PyExc_RuntimeError, NULL);
	HoldError = PyErr_NewExceptionWithDoc(
		"eachobs.HoldError",
		"As many batches are alive as hold allows.", LoaderError, NULL);
	if (!LoaderError || !HoldError ||
	    PyModule_AddObjectRef(m, "LoaderError", LoaderError) < 0 ||
	    PyModule_AddObjectRef(m, "HoldError", HoldError) < 0 ||
	    PyModule_AddObjectRef(m, "Pool", (PyObject *)&PoolType) < 0 ||
	    PyModule_AddObjectRef(m, "Loader", (PyObject *)&LoaderType) < 0 ||
	    PyModule_AddIntConstant(m, "MAX_FIELDS", EACHOBS_MAX_FIELDS) < 0 ||
	    PyModule_AddObject(m, "FIELD_ADDRESS",
			       PyLong_FromVoidPtr((void *)eachobs_field)) < 0 ||
	    PyModule_AddStringConstant(m, "C_VERSION",
				       eachobs_version_string()) < 0) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}
