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
 * getobs (gil.h). Our own state shared between threads (the failures a
 * getobs kept) has its own mutex, never the GIL.
 *
 * Ctrl-C: while the consumer waits, the ticker (ticker.h) interrupts it
 * every TICK_MS, and it runs PyErr_CheckSignals() before waiting again.
 *
 * The other files: sample.c writes a Python sample into its fields,
 * buffers.c is the allocator the library gets, types.c the Pool and Leaf
 * types.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "buffers.h"
#include "gil.h"
#include "sample.h"
#include "ticker.h"
#include "types.h"

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

static PyObject *LoaderError, *HoldError;

/* ---- Loader: one epoch ---------------------------------------------- */

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
	struct ticker ticker;
	/* The consumer is taking the GIL back: loader threads let it have it
	 * before they take it again (gil.h). */
	struct gil_gate gil;
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

/* Whether e says already where it was raised (the batches of a
 * collate_fn name the sample, not the batch). */
static bool already_noted(PyObject *e)
{
	static PyObject *prefix;
	PyObject *notes = PyObject_GetAttrString(e, "__notes__");
	bool found = false;

	if (!notes || (!prefix && !(prefix = PyUnicode_InternFromString(
					    "raised by dataset[")))) {
		Py_XDECREF(notes);
		PyErr_Clear();
		return false;
	}
	for (Py_ssize_t i = 0; PyList_Check(notes) &&
			       i < PyList_GET_SIZE(notes) && !found; i++) {
		PyObject *n = PyList_GET_ITEM(notes, i);
		found = PyUnicode_Check(n) &&
			PyUnicode_Tailmatch(n, prefix, 0, PY_SSIZE_T_MAX, -1) == 1;
	}
	Py_DECREF(notes);
	return found;
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
	PyObject *note = already_noted(value)
				 ? NULL
				 : PyUnicode_FromFormat("raised by dataset[%zu] "
							"on a loader thread",
							idx);
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

static int py_getobs(void *ctx, size_t idx, void *obs)
{
	Loader *L = ctx;

	gil_gate_pass(&L->gil);
	int g = gil_enter();
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
	gil_leave(g);
	return rc;
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
		"pin_alloc", "autotune", "autotune_start", NULL };
	PyObject *dataset, *plan, *fields, *specs, *tensor_type, *collate;
	PyObject *indices, *resume, *pool, *worker_init, *pin_alloc;
	unsigned long long getobs_addr, ctx_addr, seed, epoch;
	Py_ssize_t numobs, batchsize, buffersize;
	int executor, ordered, skip, shuffle, drop_last, autotune = 0;
	unsigned nthreads, hold, shard_index, shard_count, autotune_start = 0;

	if (L->failures) {
		PyErr_SetString(PyExc_RuntimeError, "Loader: started already");
		return -1;
	}
	if (!PyArg_ParseTupleAndKeywords(
		    args, kw, "OnKKOOOOOnipInIpOpKKIIpOOOO|pI", names, &dataset,
		    &numobs, &getobs_addr, &ctx_addr, &plan, &fields, &specs,
		    &tensor_type, &collate, &batchsize, &executor, &ordered,
		    &nthreads, &buffersize, &hold, &skip, &indices, &shuffle,
		    &seed, &epoch, &shard_index, &shard_count, &drop_last,
		    &resume, &pool, &worker_init, &pin_alloc, &autotune,
		    &autotune_start))
		return -1;
	pthread_mutex_init(&L->lock, NULL);
	gil_gate_init(&L->gil);
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
		L->init_gen = next_generation();
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
	eachobs_allocator a = { buffers_alloc, buffers_free, L->buffers };
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
		.autotune = autotune,
		.autotune_start = autotune_start,
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
	ticker_start(&L->ticker, &L->it); /* without it, Ctrl-C waits */
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
		ticker_set(&L->ticker, true);
		Py_BEGIN_ALLOW_THREADS
		if (L->batchsize)
			rc = eachobs_next_batch(it, &b);
		else
			rc = eachobs_next(it, &obs, &idx);
		ticker_set(&L->ticker, false);
		gil_gate_want(&L->gil);
		Py_END_ALLOW_THREADS
		gil_gate_got(&L->gil);
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
		struct timespec t = ticker_deadline(TICK_MS);
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
	ticker_stop(&L->ticker);
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
		"{sKsKsKsKsKsKsKsKsKsKsnsIsKsIsIsssnsn}", "yielded", s.yielded,
		"batches", s.batches, "skipped", s.skipped, "loaded", s.loaded,
		"loaded_by_consumer", s.loaded_by_consumer, "consumer_wait_ns",
		s.consumer_wait_ns, "consumer_getobs_ns", s.consumer_getobs_ns,
		"worker_getobs_ns", s.worker_getobs_ns, "worker_idle_ns",
		s.worker_idle_ns, "steals", s.steals, "max_waiting",
		(Py_ssize_t)s.max_waiting, "nworkers", s.nworkers, "failures",
		s.skipped, "nloading", s.nloading, "max_loading", s.max_loading,
		"tune_reason", eachobs_tune_reason_string(s.tune_reason),
		"buffer_depth", (Py_ssize_t)s.buffer_depth, "buffersize",
		(Py_ssize_t)s.buffersize);
}

static PyObject *Loader_blocks(Loader *L, PyObject *unused)
{
	(void)unused;
	return L->buffers ? buffers_list(L->buffers) : PyList_New(0);
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
		pthread_mutex_destroy(&L->lock);
		gil_gate_fini(&L->gil);
		pthread_cond_destroy(&L->idle);
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
	if (gil_init() < 0)
		return NULL;
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
