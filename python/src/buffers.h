/*
 * A Loader's buffers, from the allocator it gives the library: aligned,
 * zeroed, recorded (for data_ptr checks, and with collate_fn for the
 * sample references left in them at the end), page-locked with
 * pin_memory. Their state outlives the Loader while DLPack tensors use a
 * block.
 */
#ifndef EACHOBS_PY_BUFFERS_H
#define EACHOBS_PY_BUFFERS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdbool.h>
#include <stddef.h>

struct buffers;

/* collate: blocks hold sample references; pin_alloc: NULL, or
 * alloc(size) -> (address, owner) of page-locked memory. NULL when out of
 * memory. GIL held. */
struct buffers *buffers_new(bool collate, PyObject *pin_alloc);
/* The Loader lets go (GIL held when gil). */
void buffers_unref(struct buffers *B, bool gil);
/* eachobs_allocator's functions, ctx the buffers. */
void *buffers_alloc(void *ctx, size_t size, size_t align);
void buffers_free(void *ctx, void *ptr, size_t size);
/* [(address, size), ...] of the live blocks; GIL held. */
PyObject *buffers_list(struct buffers *B);

#endif /* EACHOBS_PY_BUFFERS_H */
