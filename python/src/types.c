/*
 * Pool and Leaf (types.h).
 */
#include "types.h"

#include <dlpack/dlpack.h>
#include <errno.h>

/* ---- Pool: persistent threads that loaders borrow ------------------- */

static atomic_ullong generations = 1;

uint64_t next_generation(void)
{
	return atomic_fetch_add(&generations, 1);
}

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
	self->gen = next_generation();
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

PyTypeObject PoolType = {
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

void capsule_destructor(PyObject *cap)
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

PyTypeObject LeafType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "eachobs._eachobs.Leaf",
	.tp_basicsize = sizeof(Leaf),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "A field of a batch, for numpy.from_dlpack.",
	.tp_dealloc = (destructor)Leaf_dealloc,
	.tp_methods = Leaf_methods,
};

PyObject *make_leaf(PyObject *mod, PyObject *cap)
{
	(void)mod;
	Leaf *l = PyObject_New(Leaf, &LeafType);

	if (!l)
		return NULL;
	Py_INCREF(cap);
	l->capsule = cap;
	return (PyObject *)l;
}

