/*
 * A Loader's buffers (buffers.h).
 */
#include "buffers.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

struct buffers *buffers_new(bool collate, PyObject *pin_alloc)
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
void buffers_unref(struct buffers *B, bool gil)
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

/* Buffers: aligned, zeroed (with collate_fn, a slot of NULLs holds no
 * reference), recorded. Runs inside eachobs_parallel, GIL released. */
void *buffers_alloc(void *ctx, size_t size, size_t align)
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
void buffers_free(void *ctx, void *ptr, size_t size)
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

PyObject *buffers_list(struct buffers *B)
{
	PyObject *out = PyList_New(0);

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
