/*
 * eachobs_dlpack: hand an item that eachobs yielded to any framework that
 * reads DLPack (libtorch's at::fromDLPack, PyTorch's torch.from_dlpack,
 * JAX, CuPy, TensorFlow), without a copy, and give it back to the loader
 * exactly when the framework drops the tensor.
 *
 * Needs DLPack's header (Debian: libdlpack-dev, <dlpack/dlpack.h>, DLPack
 * 0.6); installed only when the library was built with it.
 *
 *     eachobs_options o = { .batchsize = 128, .hold = 2 };
 *     ...
 *     while ((rc = eachobs_next_batch(it, &b)) == 1) {
 *             DLManagedTensor *t;
 *             int64_t shape[] = { 28, 28 };   // one observation
 *             eachobs_dlpack(it, b.data, (DLDataType){ kDLFloat, 32, 1 },
 *                            2, shape, &t);  // [count, 28, 28], in place
 *             at::Tensor x = at::fromDLPack(t); // the batch buffer itself
 *             ...                               // x's deleter releases it
 *     }
 *
 * With eachobs_options.fields (an image and its label, say),
 * eachobs_dlpack_fields() makes one tensor per field instead, each over
 * its field's array: [count, 28, 28] float and [count] int64.
 */
#ifndef EACHOBS_DLPACK_H
#define EACHOBS_DLPACK_H

#include <eachobs.h>
#include <dlpack/dlpack.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Most dimensions of one observation that eachobs_dlpack() takes. */
#define EACHOBS_DLPACK_MAX_NDIM 8

/**
 * Make a DLPack tensor of an item this iterator holds, in place.
 *
 * data is a pointer that eachobs_next() yielded, or a batch's data from
 * eachobs_next_batch(), on an iterator with hold >= 1, and not released.
 * shape describes one observation: ndim sizes whose product times the
 * dtype's bytes (bits / 8 * lanes) is the dataset's obs_size. The tensor is
 * CPU memory (kDLCPU, device 0), compact (strides NULL), byte offset 0,
 * with shape [count, shape...] for a batch (count: the batch's count) and
 * shape for a single observation; its data is data itself, no copy.
 *
 * The tensor takes the item over: eachobs_release() on it returns -EINVAL
 * and changes nothing, and the tensor's deleter gives it back to the
 * iterator. So the loader writes into that memory again when, and only
 * when, the framework has dropped the tensor; until then the item counts
 * against hold. The deleter may run on any thread, at any time:
 * concurrently with eachobs_next(), and also after eachobs_close(), when
 * the memory stays valid until the last tensor's deleter runs and is then
 * freed (with eachobs_options.allocator's free, if one was given).
 *
 * @param it     the iterator.
 * @param data   the held item.
 * @param dtype  the element type (code, bits a multiple of 8, lanes >= 1).
 * @param ndim   1 .. EACHOBS_DLPACK_MAX_NDIM.
 * @param shape  ndim sizes, each >= 0.
 * @param out    receives the tensor; NULL on failure.
 * @return 0; -EINVAL when it, data, shape or out is NULL, the iterator's
 *   observations have several fields (eachobs_dlpack_fields() takes
 *   them), ndim is out of range, a size is negative, the dtype has no
 *   whole bytes (bits not a positive multiple of 8, or lanes 0), the
 *   shape's bytes overflow or are
 *   not obs_size, data is not an item this iterator holds (hold 0, never
 *   yielded, released, from another iterator, not the start of an
 *   observation) or already belongs to a tensor; -ENOMEM when the tensor
 *   cannot be allocated. On failure *out is NULL (when out is not), nothing
 *   else changes and the iterator stays usable.
 *
 * Thread: the iterator's consumer. Never blocks. The deleter: any thread.
 */
EACHOBS_API int eachobs_dlpack(eachobs_iter *it, const void *data,
			       DLDataType dtype, int ndim,
			       const int64_t *shape, DLManagedTensor **out);

/** What one field of an observation is (eachobs_dlpack_fields()). */
typedef struct eachobs_dlpack_field {
	DLDataType dtype; /**< element type, whole bytes */
	int ndim;         /**< 0 (a scalar) .. EACHOBS_DLPACK_MAX_NDIM */
	int64_t shape[EACHOBS_DLPACK_MAX_NDIM]; /**< ndim sizes, each >= 0 */
} eachobs_dlpack_field;

/**
 * Make one DLPack tensor per field (eachobs_options.fields; without them,
 * the one field of obs_size bytes) of an item this iterator holds, in
 * place: out[k] is field k, shape [count, fields[k].shape...] for a batch
 * and fields[k].shape for a single observation, over field k's array
 * (eachobs_field_data()), compact, CPU memory.
 *
 * The tensors take the item over together, as eachobs_dlpack()'s does:
 * it goes back to the iterator when the last of them is deleted, each
 * deleter on any thread, at any time, also after eachobs_close().
 *
 * @param it       the iterator.
 * @param data     the held item (an observation, or a batch's data).
 * @param fields   nfields descriptions whose bytes (dtype bytes times the
 *                 shape's product) are the fields' sizes.
 * @param nfields  the iterator's number of fields (1 without fields).
 * @param out      nfields pointers; receives the tensors, all NULL on
 *                 failure.
 * @return 0; -EINVAL when it, data, fields or out is NULL, nfields is not
 *   the iterator's, a field's ndim is out of range, a size is negative, a
 *   dtype has no whole bytes, a field's bytes are not its size, or data is
 *   not an item this iterator holds or already belongs to a tensor;
 *   -ENOMEM when the tensors cannot be allocated. On failure nothing else
 *   changes and the iterator stays usable.
 *
 * Thread: the iterator's consumer. Never blocks. The deleters: any thread.
 */
EACHOBS_API int eachobs_dlpack_fields(eachobs_iter *it, const void *data,
				      const eachobs_dlpack_field *fields,
				      size_t nfields, DLManagedTensor **out);

#ifdef __cplusplus
}
#endif

#endif /* EACHOBS_DLPACK_H */
