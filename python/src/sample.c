/*
 * A sample written into its fields (sample.h). The walk follows the plan
 * in preorder: a container checks the sample's container and recurses, a
 * leaf checks its kind, dtype and shape and copies its bytes once, from
 * the object's own buffer straight into the field. A torch tensor gives
 * its buffer through .numpy(), which shares its memory (no copy).
 */
#include "sample.h"

#include <eachobs.h>
#include <stdbool.h>
#include <string.h>

static PyObject *str_numpy, *str_detach, *str_dtype, *str_shape,
	*str_is_contiguous, *str_is_cpu, *str_data_ptr;

static int intern(PyObject **s, const char *name)
{
	return *s || (*s = PyUnicode_InternFromString(name)) ? 0 : -1;
}

int plan_init(struct plan *p, PyObject *nodes, PyObject *tensor_type)
{
	memset(p, 0, sizeof(*p));
	if (intern(&str_numpy, "numpy") || intern(&str_detach, "detach") ||
	    intern(&str_dtype, "dtype") || intern(&str_shape, "shape") ||
	    intern(&str_is_contiguous, "is_contiguous") ||
	    intern(&str_is_cpu, "is_cpu") || intern(&str_data_ptr, "data_ptr"))
		return -1;
	if (!PyList_Check(nodes)) {
		PyErr_SetString(PyExc_TypeError, "plan: a list of nodes");
		return -1;
	}
	p->nnodes = (size_t)PyList_GET_SIZE(nodes);
	p->nodes = PyMem_Calloc(p->nnodes ? p->nnodes : 1, sizeof(*p->nodes));
	if (!p->nodes) {
		PyErr_NoMemory();
		return -1;
	}
	for (size_t i = 0; i < p->nnodes; i++) {
		struct node *d = &p->nodes[i];
		PyObject *t = PyList_GET_ITEM(nodes, (Py_ssize_t)i), *keys, *shape;
		PyObject *tdtype;
		int kind, dkind;
		Py_ssize_t field, itemsize;
		if (!PyArg_ParseTuple(t, "inOUnCnO!O", &kind, &d->n, &keys,
				      &d->path, &field, &dkind, &itemsize,
				      &PyTuple_Type, &shape, &tdtype))
			goto fail;
		if (tdtype != Py_None) {
			Py_INCREF(tdtype);
			d->tdtype = tdtype;
			Py_INCREF(shape);
			d->tshape = shape;
		}
		d->kind = (enum node_kind)kind;
		d->field = (size_t)field;
		d->dkind = (char)dkind;
		d->itemsize = (size_t)itemsize;
		d->ndim = (int)PyTuple_GET_SIZE(shape);
		if (d->ndim > SAMPLE_MAX_NDIM) {
			PyErr_Format(PyExc_ValueError, "%U has %d dimensions, "
				     "at most %d are supported", d->path,
				     d->ndim, SAMPLE_MAX_NDIM);
			goto fail;
		}
		d->nbytes = d->itemsize;
		for (int j = 0; j < d->ndim; j++) {
			d->shape[j] = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, j));
			if (d->shape[j] < 0)
				goto fail;
			d->nbytes *= (size_t)d->shape[j];
		}
		Py_INCREF(d->path);
		if (keys != Py_None) {
			Py_INCREF(keys);
			d->keys = keys;
		}
	}
	Py_XINCREF(tensor_type);
	p->tensor_type = tensor_type == Py_None ? NULL : tensor_type;
	if (tensor_type == Py_None)
		Py_DECREF(tensor_type);
	return 0;
fail:
	if (!PyErr_Occurred())
		PyErr_SetString(PyExc_ValueError, "plan: a bad node");
	plan_fini(p);
	return -1;
}

void plan_fini(struct plan *p)
{
	for (size_t i = 0; p->nodes && i < p->nnodes; i++) {
		Py_XDECREF(p->nodes[i].path);
		Py_XDECREF(p->nodes[i].keys);
		Py_XDECREF(p->nodes[i].tdtype);
		Py_XDECREF(p->nodes[i].tshape);
	}
	PyMem_Free(p->nodes);
	Py_CLEAR(p->tensor_type);
	memset(p, 0, sizeof(*p));
}

/* "a str" / "a tuple of 3" for messages. */
static PyObject *describe(PyObject *o)
{
	if (PyTuple_Check(o) || PyList_Check(o) || PyDict_Check(o))
		return PyUnicode_FromFormat("a %s of %zd", Py_TYPE(o)->tp_name,
					    PyObject_Length(o));
	return PyUnicode_FromFormat("a %s", Py_TYPE(o)->tp_name);
}

static int mismatch(const struct node *d, size_t idx, PyObject *o,
		    PyObject *exc, const char *first)
{
	PyObject *got = describe(o);

	if (got) {
		PyErr_Format(exc, "dataset[%zu]: %U is %U, where the first "
			     "sample's is %s", idx, d->path, got, first);
		Py_DECREF(got);
	}
	return -1;
}

/* Where leaf d goes: field 0 is obs, the others eachobs_field's. */
static unsigned char *place(const struct node *d, void *obs)
{
	return d->field == 0 ? obs : eachobs_field(d->field);
}

/* Normalize a buffer format ("<f", "l", "?") to numpy's kind letter;
 * 0 for what we do not take (big-endian, structured, pointers). */
static char format_kind(const char *f)
{
	if (!f)
		return 'u';
	if (*f == '@' || *f == '=' || *f == '<')
		f++;
	if (f[0] == 'Z' && (f[1] == 'f' || f[1] == 'd') && !f[2])
		return 'c';
	if (!f[0] || f[1])
		return 0;
	switch (f[0]) {
	case '?': return 'b';
	case 'b': case 'h': case 'i': case 'l': case 'q': case 'n': return 'i';
	case 'B': case 'H': case 'I': case 'L': case 'Q': case 'N': return 'u';
	case 'e': case 'f': case 'd': return 'f';
	default: return 0;
	}
}

static PyObject *shape_str(int ndim, const Py_ssize_t *shape)
{
	PyObject *t = PyTuple_New(ndim);

	for (int i = 0; t && i < ndim; i++)
		PyTuple_SET_ITEM(t, i, PyLong_FromSsize_t(shape[i]));
	if (!t)
		return NULL;
	PyObject *s = PyObject_Repr(t);
	Py_DECREF(t);
	return s;
}

static int bad_leaf(const struct node *d, size_t idx, const Py_buffer *v,
		    char kind)
{
	PyObject *got = shape_str(v->ndim, v->shape);
	PyObject *want = shape_str(d->ndim, d->shape);

	if (got && want) {
		if (kind != d->dkind || (size_t)v->itemsize != d->itemsize)
			PyErr_Format(PyExc_ValueError,
				     "dataset[%zu]: %U has dtype %c%zd (buffer "
				     "format '%s'), where the first sample's is "
				     "%c%zu", idx, d->path, kind ? kind : '?',
				     v->itemsize, v->format ? v->format : "B",
				     d->dkind, d->itemsize);
		else
			PyErr_Format(PyExc_ValueError,
				     "dataset[%zu]: %U has shape %U, where the "
				     "first sample's is %U", idx, d->path, got,
				     want);
	}
	Py_XDECREF(got);
	Py_XDECREF(want);
	return -1;
}

/* Copy a buffer-protocol object of the leaf's dtype and shape. */
static int write_buffer(const struct node *d, size_t idx, PyObject *o,
			void *obs)
{
	Py_buffer v;

	if (PyObject_GetBuffer(o, &v, PyBUF_RECORDS_RO) < 0)
		return -1;
	char kind = format_kind(v.format);
	int ok = kind == d->dkind && (size_t)v.itemsize == d->itemsize &&
		 v.ndim == d->ndim;
	for (int i = 0; ok && i < d->ndim; i++)
		ok = v.shape[i] == d->shape[i];
	int rc = ok ? PyBuffer_ToContiguous(place(d, obs), &v,
					    (Py_ssize_t)d->nbytes, 'C')
		    : bad_leaf(d, idx, &v, kind);
	PyBuffer_Release(&v);
	return rc;
}

/* o's attribute (or method's result) is `want`: 1, 0, or -1 with an
 * exception. */
static int attr_is(PyObject *o, PyObject *name, bool call, PyObject *want)
{
	PyObject *v = call ? PyObject_CallMethodNoArgs(o, name)
			   : PyObject_GetAttr(o, name);

	if (!v)
		return -1;
	int eq = v == want ? 1 : PyObject_RichCompareBool(v, want, Py_EQ);
	Py_DECREF(v);
	return eq;
}

/*
 * A contiguous CPU tensor of the first sample's dtype and shape: its
 * bytes straight from its data pointer (five attribute reads, a fifth of
 * what .numpy() and a buffer cost). 1 when written, 0 when the tensor
 * needs the general path (its message, or strides), -1 on an exception.
 * Complex tensors always take the general path: a lazily conjugated one
 * does not hold the values it shows.
 */
static int write_tensor_fast(const struct node *d, PyObject *o, void *obs)
{
	int ok;

	if (!d->tdtype || d->dkind == 'c')
		return 0;
	if ((ok = attr_is(o, str_dtype, false, d->tdtype)) != 1 ||
	    (ok = attr_is(o, str_shape, false, d->tshape)) != 1 ||
	    (ok = attr_is(o, str_is_cpu, false, Py_True)) != 1 ||
	    (ok = attr_is(o, str_is_contiguous, true, Py_True)) != 1)
		return ok;
	PyObject *ptr = PyObject_CallMethodNoArgs(o, str_data_ptr);
	if (!ptr)
		return -1;
	void *src = PyLong_AsVoidPtr(ptr);
	Py_DECREF(ptr);
	if (!src && PyErr_Occurred())
		return -1;
	if (d->nbytes)
		memcpy(place(d, obs), src, d->nbytes);
	return 1;
}

/* A torch tensor's bytes, through the numpy array that shares them. */
static int write_tensor(const struct node *d, size_t idx, PyObject *o,
			void *obs)
{
	int fast = write_tensor_fast(d, o, obs);

	if (fast != 0)
		return fast < 0 ? -1 : 0;
	PyObject *a = PyObject_CallMethodNoArgs(o, str_numpy);

	if (!a && PyErr_ExceptionMatches(PyExc_RuntimeError)) {
		/* A tensor that requires grad: its data, without the graph. */
		PyErr_Clear();
		PyObject *t = PyObject_CallMethodNoArgs(o, str_detach);
		a = t ? PyObject_CallMethodNoArgs(t, str_numpy) : NULL;
		Py_XDECREF(t);
	}
	if (!a)
		return -1;
	int rc = write_buffer(d, idx, a, obs);
	Py_DECREF(a);
	return rc;
}

static int write_leaf(const struct node *d, size_t idx, PyObject *o,
		      void *obs, const struct plan *p)
{
	unsigned char *dst;

	switch (d->kind) {
	case NODE_TENSOR:
		if (!p->tensor_type ||
		    !PyObject_TypeCheck(o, (PyTypeObject *)p->tensor_type))
			return mismatch(d, idx, o, PyExc_TypeError, "a tensor");
		return write_tensor(d, idx, o, obs);
	case NODE_ARRAY:
		if (!PyObject_CheckBuffer(o) || PyUnicode_Check(o) ||
		    PyBytes_Check(o))
			return mismatch(d, idx, o, PyExc_TypeError,
					"a numpy array");
		return write_buffer(d, idx, o, obs);
	case NODE_INT:
		if (!PyLong_Check(o) || PyBool_Check(o))
			return mismatch(d, idx, o, PyExc_TypeError, "an int");
		{
			long long v = PyLong_AsLongLong(o);
			if (v == -1 && PyErr_Occurred())
				return -1;
			memcpy(place(d, obs), &v, sizeof(v));
		}
		return 0;
	case NODE_FLOAT:
		if (!PyFloat_Check(o))
			return mismatch(d, idx, o, PyExc_TypeError, "a float");
		{
			double v = PyFloat_AS_DOUBLE(o);
			memcpy(place(d, obs), &v, sizeof(v));
		}
		return 0;
	case NODE_BOOL:
		if (!PyBool_Check(o))
			return mismatch(d, idx, o, PyExc_TypeError, "a bool");
		dst = place(d, obs);
		*dst = o == Py_True;
		return 0;
	default:
		PyErr_SetString(PyExc_SystemError, "plan: not a leaf");
		return -1;
	}
}

static int walk(const struct plan *p, size_t *i, PyObject *o, size_t idx,
		void *obs);

static int walk_seq(const struct plan *p, const struct node *d, size_t *i,
		    PyObject *o, size_t idx, void *obs)
{
	if (!PyTuple_Check(o) && !PyList_Check(o))
		return mismatch(d, idx, o, PyExc_TypeError, "a sequence");
	if (PySequence_Fast_GET_SIZE(o) != d->n) {
		PyObject *got = describe(o);
		if (got)
			PyErr_Format(PyExc_ValueError, "dataset[%zu]: %U is %U, "
				     "where the first sample's has %zd items",
				     idx, d->path, got, d->n);
		Py_XDECREF(got);
		return -1;
	}
	PyObject **items = PySequence_Fast_ITEMS(o);
	for (Py_ssize_t k = 0; k < d->n; k++)
		if (walk(p, i, items[k], idx, obs) < 0)
			return -1;
	return 0;
}

static int walk_dict(const struct plan *p, const struct node *d, size_t *i,
		     PyObject *o, size_t idx, void *obs)
{
	if (!PyDict_Check(o))
		return mismatch(d, idx, o, PyExc_TypeError, "a dict");
	if (PyDict_GET_SIZE(o) != d->n)
		return mismatch(d, idx, o, PyExc_ValueError,
				"a dict of other keys");
	for (Py_ssize_t k = 0; k < d->n; k++) {
		PyObject *key = PyTuple_GET_ITEM(d->keys, k);
		PyObject *v = PyDict_GetItemWithError(o, key);
		if (!v) {
			if (!PyErr_Occurred())
				PyErr_Format(PyExc_KeyError,
					     "dataset[%zu]: %U has no key %R, "
					     "which the first sample has", idx,
					     d->path, key);
			return -1;
		}
		if (walk(p, i, v, idx, obs) < 0)
			return -1;
	}
	return 0;
}

static int walk(const struct plan *p, size_t *i, PyObject *o, size_t idx,
		void *obs)
{
	const struct node *d = &p->nodes[(*i)++];

	switch (d->kind) {
	case NODE_SEQ:
		return walk_seq(p, d, i, o, idx, obs);
	case NODE_DICT:
		return walk_dict(p, d, i, o, idx, obs);
	default:
		return write_leaf(d, idx, o, obs, p);
	}
}

int plan_write(const struct plan *p, PyObject *sample, size_t idx, void *obs)
{
	size_t i = 0;

	return walk(p, &i, sample, idx, obs);
}
