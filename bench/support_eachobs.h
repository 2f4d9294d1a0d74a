/*
 * The part of the support library that knows eachobs (support.h has the
 * rest, which the peers timing other loaders link without the library):
 * executor names for messages and output, and the benchmarks' checking
 * consumer. It calls whichever copy of the library the program links,
 * the shared one or the tests' static one.
 */
#ifndef EACHOBS_BENCH_SUPPORT_EACHOBS_H
#define EACHOBS_BENCH_SUPPORT_EACHOBS_H

#include <eachobs.h>

#include <stdbool.h>
#include <stddef.h>

/* "threaded", "background", "serial"; "?" for anything else. The
 * benchmarks' tables and CSV files hold these. */
const char *executor_name(eachobs_executor ex);

/* Drain it, whose slots hold a size_t each, and die() unless the indices
 * are a permutation of [0, n) (the identity when ordered), every slot is
 * non-NULL and holds its index. seen: n zeroed bytes. */
void consume(eachobs_iter *it, size_t n, bool ordered, unsigned char *seen);

#endif
