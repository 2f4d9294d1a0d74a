/*
 * Writing a Python sample into its place in a unit buffer: the layout the
 * first sample fixed (its structure, and each leaf's kind, dtype and
 * shape), as a program of nodes in preorder, and the walk that checks a
 * later sample against it while it copies each leaf once into its field.
 * Runs under the GIL, on whichever thread loads the sample.
 */
#ifndef EACHOBS_PY_SAMPLE_H
#define EACHOBS_PY_SAMPLE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stddef.h>

enum node_kind {
	NODE_SEQ,    /* a tuple or list of n items (the nodes that follow) */
	NODE_DICT,   /* a mapping over `keys`, in that order */
	NODE_TENSOR, /* a torch.Tensor */
	NODE_ARRAY,  /* a numpy array or scalar */
	NODE_INT,    /* a Python int: int64 */
	NODE_FLOAT,  /* a Python float: float64 */
	NODE_BOOL,   /* a Python bool: one byte */
};

#define SAMPLE_MAX_NDIM 8

struct node {
	enum node_kind kind;
	Py_ssize_t n;       /* SEQ: items; DICT: keys */
	PyObject *keys;     /* DICT: a tuple of the keys */
	PyObject *path;     /* str: where the node is, for messages */
	/* Leaves: the field written, its dtype and shape. */
	size_t field;
	char dkind;         /* 'f', 'i', 'u', 'b' or 'c', as numpy's */
	size_t itemsize;
	int ndim;
	Py_ssize_t shape[SAMPLE_MAX_NDIM];
	size_t nbytes;
	/* Tensors: the first sample's torch dtype and shape (a tuple), for
	 * the fast path that reads the data pointer instead of a buffer. */
	PyObject *tdtype;
	PyObject *tshape;
};

struct plan {
	struct node *nodes;
	size_t nnodes;
	PyObject *tensor_type; /* torch.Tensor, or NULL without torch */
};

/* Read a plan from the Python list of node tuples _layout.py made;
 * 0, or -1 with a Python exception. */
int plan_init(struct plan *p, PyObject *nodes, PyObject *tensor_type);
void plan_fini(struct plan *p);

/* Write sample (dataset[idx]) into the current getobs's fields (obs is
 * field 0, eachobs_field(k) the others). 0, or -1 with a Python exception
 * that names idx, the leaf and what differs. */
int plan_write(const struct plan *p, PyObject *sample, size_t idx, void *obs);

#endif /* EACHOBS_PY_SAMPLE_H */
