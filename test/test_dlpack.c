/*
 * eachobs_dlpack: a tensor is the held item in place, with the shape
 * asked for; the item is the tensor's until its deleter runs, on any
 * thread, also after eachobs_close, which keeps the memory until then;
 * bad requests change nothing. Over every executor, ordered and not,
 * single and batched, on a pool and not.
 */
#define _GNU_SOURCE
#include "eachobs.h"
#include "eachobs_dlpack.h"
#include "helpers.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

TestSuite(dlpack, .init = deadline, .timeout = 60);

/* Observations of 2 x 3 float32, each filled with its index. */
#define OBS_FLOATS 6
static const DLDataType f32 = { kDLFloat, 32, 1 };
static const int64_t shape[] = { 2, 3 };

static size_t numobs_300(void *ctx)
{
	(void)ctx;
	return 300;
}

static int fill(void *ctx, size_t idx, void *obs)
{
	float *x = obs;

	(void)ctx;
	for (int i = 0; i < OBS_FLOATS; i++)
		x[i] = (float)idx;
	return 0;
}

static eachobs_iter *start(eachobs_executor ex, bool ordered, size_t bs,
			   unsigned hold, eachobs_pool *pool,
			   const eachobs_allocator *a)
{
	eachobs_dataset data = { NULL, numobs_300, fill,
				 OBS_FLOATS * sizeof(float) };
	eachobs_options o = { .nthreads = 3, .executor = ex,
			      .ordered = ordered, .batchsize = bs,
			      .hold = hold, .pool = pool, .allocator = a };
	eachobs_iter *it;

	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
	return it;
}

/* The next item as a tensor: 1, or 0 at the end. */
static int next_tensor(eachobs_iter *it, size_t bs, DLManagedTensor **t,
		       size_t *count)
{
	const void *p;
	size_t idx;
	int rc;

	if (bs) {
		eachobs_batch b;
		rc = eachobs_next_batch(it, &b);
		p = b.data;
		*count = b.count;
	} else {
		rc = eachobs_next(it, &p, &idx);
		*count = 1;
	}
	if (rc != 1)
		return rc;
	cr_assert_eq(eachobs_dlpack(it, p, f32, 2, shape, t), 0, "%s",
		     eachobs_last_error());
	const DLTensor *x = &(*t)->dl_tensor;
	cr_assert_eq(x->data, p, "the tensor is not the item in place");
	cr_assert_eq(x->device.device_type, kDLCPU);
	cr_assert_null(x->strides);
	cr_assert_eq(x->byte_offset, 0);
	cr_assert_eq(x->ndim, bs ? 3 : 2);
	if (bs)
		cr_assert_eq(x->shape[0], (int64_t)*count);
	cr_assert_eq(x->shape[bs ? 1 : 0], 2);
	cr_assert_eq(x->shape[bs ? 2 : 1], 3);
	cr_assert_eq(eachobs_release(it, p), -EINVAL,
		     "released an item a tensor owns");
	return 1;
}

/* Every observation's floats are its index. */
static void check_values(DLManagedTensor *t, size_t count,
			 unsigned char *seen)
{
	const float *x = t->dl_tensor.data;

	for (size_t j = 0; j < count; j++) {
		size_t idx = (size_t)x[j * OBS_FLOATS];
		cr_assert_lt(idx, 300);
		cr_assert_eq(seen[idx]++, 0, "index %zu twice", idx);
		for (int i = 1; i < OBS_FLOATS; i++)
			cr_assert_eq(x[j * OBS_FLOATS + i], (float)idx);
	}
}

ParameterizedTestParameters(dlpack,
			    a_tensor_is_the_item_in_place_until_its_deleter_runs)
{
	return mode_params();
}

ParameterizedTest(const struct mode *m, dlpack,
		  a_tensor_is_the_item_in_place_until_its_deleter_runs)
{
	eachobs_pool *pool;

	cr_assert_eq(eachobs_pool_create(&pool, 2), 0);
	for (size_t bs = 0; bs <= 16; bs += 16)
		for (int pl = 0; pl < 2; pl++) {
			/* hold 3: two tensors alive, and the next item
			 * taken meanwhile. */
			eachobs_iter *it = start(m->executor, m->ordered, bs,
						 3, pl ? pool : NULL, NULL);
			DLManagedTensor *t[2] = { NULL, NULL }, *n;
			size_t count[2] = { 0, 0 }, c;
			unsigned char seen[300] = { 0 };
			unsigned k = 0;
			/* Keep the last two alive: the next item comes
			 * while they are. */
			while (next_tensor(it, bs, &n, &c) == 1) {
				if (t[k % 2]) {
					check_values(t[k % 2], count[k % 2],
						     seen);
					t[k % 2]->deleter(t[k % 2]);
				}
				t[k % 2] = n;
				count[k % 2] = c;
				k++;
			}
			for (int i = 0; i < 2; i++)
				if (t[i]) {
					check_values(t[i], count[i], seen);
					t[i]->deleter(t[i]);
				}
			eachobs_close(it);
			for (int i = 0; i < 300; i++)
				cr_assert_eq(seen[i], 1);
		}
	eachobs_pool_destroy(pool);
}

/* A "device thread" deletes the tensors while the consumer goes on. */
struct queue {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	DLManagedTensor *t[64];
	size_t count[64];
	unsigned head, tail;
	bool done;
	unsigned char seen[300];
};

static void *delete_them(void *arg)
{
	struct queue *q = arg;

	pthread_mutex_lock(&q->lock);
	for (;;) {
		while (q->head == q->tail && !q->done)
			pthread_cond_wait(&q->cond, &q->lock);
		if (q->head == q->tail)
			break;
		DLManagedTensor *t = q->t[q->head % 64];
		size_t c = q->count[q->head++ % 64];
		pthread_mutex_unlock(&q->lock);
		const float *x = t->dl_tensor.data;
		for (size_t j = 0; j < c; j++)
			q->seen[(size_t)x[j * OBS_FLOATS]]++;
		t->deleter(t);
		pthread_mutex_lock(&q->lock);
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

ParameterizedTestParameters(dlpack,
			    deleters_on_another_thread_give_items_back_while_iterating)
{
	return mode_params();
}

ParameterizedTest(const struct mode *m, dlpack,
		  deleters_on_another_thread_give_items_back_while_iterating)
{
	struct queue q = { .lock = PTHREAD_MUTEX_INITIALIZER,
			   .cond = PTHREAD_COND_INITIALIZER };
	eachobs_iter *it = start(m->executor, m->ordered, 8, 3, NULL, NULL);
	pthread_t th;
	DLManagedTensor *t;
	size_t c;
	int rc;

	cr_assert_eq(pthread_create(&th, NULL, delete_them, &q), 0);
	while ((rc = next_tensor(it, 8, &t, &c)) != 0) {
		if (rc == -ENOBUFS) { /* all 3 on the device */
			sched_yield();
			continue;
		}
		pthread_mutex_lock(&q.lock);
		q.t[q.tail % 64] = t;
		q.count[q.tail++ % 64] = c;
		pthread_cond_signal(&q.cond);
		pthread_mutex_unlock(&q.lock);
	}
	pthread_mutex_lock(&q.lock);
	q.done = true;
	pthread_cond_signal(&q.cond);
	pthread_mutex_unlock(&q.lock);
	pthread_join(th, NULL);
	eachobs_close(it);
	for (int i = 0; i < 300; i++)
		cr_assert_eq(q.seen[i], 1);
}

/* The memory outlives the iterator while a tensor is alive, and goes back
 * to the allocator when the last deleter runs. */
struct counting {
	int live;
};

static void *c_alloc(void *ctx, size_t size, size_t align)
{
	void *p = NULL;

	((struct counting *)ctx)->live++;
	return posix_memalign(&p, align, size) == 0 ? p : NULL;
}

static void c_free(void *ctx, void *ptr, size_t size)
{
	(void)size;
	((struct counting *)ctx)->live--;
	free(ptr);
}

Test(dlpack, a_tensor_keeps_its_memory_after_close)
{
	for (size_t e = 0; e < NEXECUTORS; e++) {
		struct counting c = { 0 };
		eachobs_allocator a = { c_alloc, c_free, &c };
		eachobs_iter *it = start(executors[e], true, 16, 2, NULL, &a);
		DLManagedTensor *t1, *t2;
		size_t c1, c2;
		unsigned char seen[300] = { 0 };

		cr_assert_eq(next_tensor(it, 16, &t1, &c1), 1);
		cr_assert_eq(next_tensor(it, 16, &t2, &c2), 1);
		eachobs_close(it);
		cr_assert_eq(c.live, 1, "memory freed under a live tensor");
		check_values(t1, c1, seen); /* still readable, unchanged */
		t1->deleter(t1);
		cr_assert_eq(c.live, 1);
		check_values(t2, c2, seen);
		t2->deleter(t2);
		cr_assert_eq(c.live, 0, "memory not given back after the last "
			     "deleter");
	}
}

Test(dlpack, bad_requests_change_nothing)
{
	eachobs_iter *it = start(EACHOBS_BACKGROUND, false, 0, 2, NULL, NULL);
	eachobs_iter *other = start(EACHOBS_BACKGROUND, false, 0, 2, NULL, NULL);
	eachobs_iter *nohold = start(EACHOBS_BACKGROUND, false, 0, 0, NULL, NULL);
	const void *p, *q, *r;
	DLManagedTensor *t;
	int64_t wrong[] = { 3, 3 }, neg[] = { -2, -3 }, nine[9] = { 1 };
	DLDataType bits12 = { kDLFloat, 12, 1 };

	cr_assert_eq(eachobs_next(it, &p, NULL), 1);
	cr_assert_eq(eachobs_next(other, &q, NULL), 1);
	cr_assert_eq(eachobs_next(nohold, &r, NULL), 1);
	cr_assert_eq(eachobs_dlpack(it, p, f32, 2, wrong, &t), -EINVAL);
	cr_assert_null(t);
	cr_assert_eq(eachobs_dlpack(it, p, f32, 2, neg, &t), -EINVAL);
	cr_assert_eq(eachobs_dlpack(it, p, f32, 0, shape, &t), -EINVAL);
	cr_assert_eq(eachobs_dlpack(it, p, f32, 9, nine, &t), -EINVAL);
	cr_assert_eq(eachobs_dlpack(it, p, bits12, 2, shape, &t), -EINVAL);
	cr_assert_eq(eachobs_dlpack(it, q, f32, 2, shape, &t), -EINVAL,
		     "another iterator's item");
	cr_assert_eq(eachobs_dlpack(it, (const char *)p + 4, f32, 2, shape, &t),
		     -EINVAL, "not the start of an item");
	cr_assert_eq(eachobs_dlpack(nohold, r, f32, 2, shape, &t), -EINVAL,
		     "hold 0");
	cr_assert_eq(eachobs_dlpack(NULL, p, f32, 2, shape, &t), -EINVAL);
	cr_assert_eq(eachobs_dlpack(it, NULL, f32, 2, shape, &t), -EINVAL);
	cr_assert_eq(eachobs_dlpack(it, p, f32, 2, NULL, &t), -EINVAL);
	cr_assert_eq(eachobs_dlpack(it, p, f32, 2, shape, NULL), -EINVAL);
	/* Still usable: the item converts, once. */
	cr_assert_eq(eachobs_dlpack(it, p, f32, 2, shape, &t), 0);
	DLManagedTensor *again;
	cr_assert_eq(eachobs_dlpack(it, p, f32, 2, shape, &again), -EINVAL,
		     "converted twice");
	t->deleter(t);
	cr_assert_eq(eachobs_release(it, p), -EINVAL, "released after its "
		     "deleter gave it back");
	cr_assert_eq(eachobs_next(it, &p, NULL), 1);
	cr_assert_eq(eachobs_release(it, p), 0);
	eachobs_close(it);
	eachobs_close(other);
	eachobs_close(nohold);
}

/* Observations of two fields: 2 x 3 float32 pixels, an int64 label. */
static const size_t field_sizes[] = { OBS_FLOATS * sizeof(float),
				      sizeof(int64_t) };

static int fill_fields(void *ctx, size_t idx, void *obs)
{
	int64_t label = (int64_t)idx * 7;

	fill(ctx, idx, obs);
	memcpy(eachobs_field(1), &label, sizeof(label));
	return 0;
}

static eachobs_iter *start_fields(eachobs_executor ex, bool ordered, size_t bs,
				  unsigned hold, eachobs_pool *pool,
				  const eachobs_allocator *a)
{
	eachobs_dataset data = { NULL, numobs_300, fill_fields,
				 OBS_FLOATS * sizeof(float) + sizeof(int64_t) };
	eachobs_options o = { .nthreads = 3, .executor = ex,
			      .ordered = ordered, .batchsize = bs,
			      .hold = hold, .pool = pool, .allocator = a,
			      .fields = field_sizes, .nfields = 2 };
	eachobs_iter *it;

	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0, "%s",
		     eachobs_last_error());
	return it;
}

static const eachobs_dlpack_field two_fields[] = {
	{ { kDLFloat, 32, 1 }, 2, { 2, 3 } },
	{ { kDLInt, 64, 1 }, 0, { 0 } },
};

/* The next item's field tensors: 1, or what the call returned. */
static int next_fields(eachobs_iter *it, size_t bs, DLManagedTensor **t,
		       size_t *count)
{
	const void *p;
	int rc;

	if (bs) {
		eachobs_batch b;
		rc = eachobs_next_batch(it, &b);
		p = b.data;
		*count = b.count;
	} else {
		rc = eachobs_next(it, &p, NULL);
		*count = 1;
	}
	if (rc != 1)
		return rc;
	cr_assert_eq(eachobs_dlpack_fields(it, p, two_fields, 2, t), 0, "%s",
		     eachobs_last_error());
	for (int k = 0; k < 2; k++)
		cr_assert_eq(t[k]->dl_tensor.data,
			     eachobs_field_data(it, p, (size_t)k),
			     "field %d's tensor is not its array in place", k);
	cr_assert_eq(t[0]->dl_tensor.ndim, bs ? 3 : 2);
	cr_assert_eq(t[1]->dl_tensor.ndim, bs ? 1 : 0);
	if (bs)
		cr_assert_eq(t[1]->dl_tensor.shape[0], (int64_t)*count);
	return 1;
}

/* Both tensors hold the values of the same observations. */
static void check_fields(DLManagedTensor **t, size_t count,
			 unsigned char *seen)
{
	const int64_t *label = t[1]->dl_tensor.data;

	check_values(t[0], count, seen);
	for (size_t j = 0; j < count; j++) {
		const float *x = t[0]->dl_tensor.data;
		cr_assert_eq(label[j], (int64_t)x[j * OBS_FLOATS] * 7);
	}
}

ParameterizedTestParameters(dlpack,
			    field_tensors_give_the_item_back_when_the_last_is_deleted)
{
	return mode_params();
}

ParameterizedTest(const struct mode *m, dlpack,
		  field_tensors_give_the_item_back_when_the_last_is_deleted)
{
	eachobs_pool *pool;

	cr_assert_eq(eachobs_pool_create(&pool, 2), 0);
	for (size_t bs = 0; bs <= 16; bs += 16)
		for (int pl = 0; pl < 2; pl++) {
			/* hold 1: while any tensor of an item lives, the next
			 * call has nothing left to hold. */
			eachobs_iter *it = start_fields(m->executor, m->ordered,
							bs, 1,
							pl ? pool : NULL, NULL);
			DLManagedTensor *t[2];
			size_t count, total = 0;
			unsigned char seen[300] = { 0 };
			int rc;
			while ((rc = next_fields(it, bs, t, &count)) == 1) {
				check_fields(t, count, seen);
				total += count;
				t[1]->deleter(t[1]);
				const void *p;
				eachobs_batch b;
				/* (At the end, the end comes first.) */
				cr_assert_eq(bs ? eachobs_next_batch(it, &b)
						: eachobs_next(it, &p, NULL),
					     total < 300 ? -ENOBUFS : 0,
					     "the item came back with a "
					     "tensor of it alive");
				t[0]->deleter(t[0]);
			}
			cr_assert_eq(rc, 0, "%d", rc);
			cr_assert_eq(total, 300);
			eachobs_close(it);
		}
	eachobs_pool_destroy(pool);
}

Test(dlpack, field_tensors_keep_their_memory_after_close)
{
	struct counting c = { 0 };
	eachobs_allocator a = { c_alloc, c_free, &c };
	eachobs_iter *it = start_fields(EACHOBS_BACKGROUND, true, 8, 1, NULL,
					&a);
	DLManagedTensor *t[2];
	size_t count;
	unsigned char seen[300] = { 0 };

	cr_assert_eq(next_fields(it, 8, t, &count), 1);
	eachobs_close(it);
	t[0]->deleter(t[0]);
	cr_assert_eq(c.live, 1, "memory freed under a live tensor");
	const int64_t *label = t[1]->dl_tensor.data;
	cr_assert_eq(label[1], 7, "the label of observation 1 changed");
	t[1]->deleter(t[1]);
	cr_assert_eq(c.live, 0, "memory kept after the last deleter");
	(void)seen;
}

Test(dlpack, bad_field_requests_change_nothing)
{
	eachobs_iter *it = start_fields(EACHOBS_SERIAL, false, 0, 1, NULL,
					NULL);
	eachobs_iter *plain = start(EACHOBS_SERIAL, false, 0, 1, NULL, NULL);
	const void *p, *q;
	DLManagedTensor *t[2] = { NULL, NULL }, *one;
	eachobs_dlpack_field wrong[2] = { two_fields[0], two_fields[1] };

	cr_assert_eq(eachobs_next(it, &p, NULL), 1);
	cr_assert_eq(eachobs_next(plain, &q, NULL), 1);
	cr_assert_eq(eachobs_dlpack(it, p, f32, 2, shape, &one), -EINVAL,
		     "one tensor of an item with two fields");
	cr_assert(strstr(eachobs_last_error(), "eachobs_dlpack_fields"));
	cr_assert_eq(eachobs_dlpack_fields(it, p, two_fields, 1, t), -EINVAL);
	wrong[1].dtype.bits = 32;
	cr_assert_eq(eachobs_dlpack_fields(it, p, wrong, 2, t), -EINVAL);
	cr_assert(strstr(eachobs_last_error(), "field 1"), "%s",
		  eachobs_last_error());
	wrong[1] = two_fields[1];
	wrong[0].ndim = 9;
	cr_assert_eq(eachobs_dlpack_fields(it, p, wrong, 2, t), -EINVAL);
	cr_assert_eq(eachobs_dlpack_fields(NULL, p, two_fields, 2, t),
		     -EINVAL);
	cr_assert_eq(eachobs_dlpack_fields(it, p, NULL, 2, t), -EINVAL);
	cr_assert_eq(eachobs_dlpack_fields(it, p, two_fields, 2, NULL),
		     -EINVAL);
	cr_assert_null(t[0]);
	cr_assert_null(t[1]);
	/* Without fields, the one field takes a ndim-0..8 description. */
	eachobs_dlpack_field whole = { f32, 2, { 2, 3 } };
	cr_assert_eq(eachobs_dlpack_fields(plain, q, &whole, 1, &one), 0);
	cr_assert_eq(one->dl_tensor.data, q);
	one->deleter(one);
	/* Still usable. */
	cr_assert_eq(eachobs_dlpack_fields(it, p, two_fields, 2, t), 0);
	DLManagedTensor *again[2];
	cr_assert_eq(eachobs_dlpack_fields(it, p, two_fields, 2, again),
		     -EINVAL, "converted twice");
	cr_assert_null(again[0]);
	t[0]->deleter(t[0]);
	t[1]->deleter(t[1]);
	eachobs_close(it);
	eachobs_close(plain);
}
