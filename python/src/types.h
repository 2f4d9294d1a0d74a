/*
 * The small Python types of the extension: Pool (an eachobs_pool, the
 * threads persistent_workers keeps) and Leaf (one field's DLPack capsule
 * behind __dlpack__, for numpy.from_dlpack).
 */
#ifndef EACHOBS_PY_TYPES_H
#define EACHOBS_PY_TYPES_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <eachobs.h>
#include <stdatomic.h>
#include <stdint.h>

typedef struct {
	PyObject_HEAD
	eachobs_pool *pool;
	uint64_t gen;            /* worker_init_fn runs once per thread */
	atomic_uint next_worker; /* the ids worker_init_fn receives */
} Pool;

extern PyTypeObject PoolType, LeafType;

/* A generation no Pool or Loader had before: never 0, never repeated. */
uint64_t next_generation(void);
/* A "dltensor" capsule's destructor: the tensor's deleter, unless a
 * framework took it over. */
void capsule_destructor(PyObject *cap);
/* leaf(capsule): a Leaf over it (the module function). */
PyObject *make_leaf(PyObject *mod, PyObject *cap);

#endif /* EACHOBS_PY_TYPES_H */
