/*
 * Nice values, which Linux keeps per thread (nice.c): the calling
 * thread's, and whether a thread of this process may lower its own to a
 * given value.
 */
#ifndef EACHOBS_NICE_H
#define EACHOBS_NICE_H

/* The calling thread's nice value; 0 when it cannot be read. */
int eachobs__own_nice(void);

/* Whether a thread of this process may set its nice value to want from
 * above it: 1 yes, 0 no; -ENOMEM or -EAGAIN (with eachobs_last_error set)
 * when the thread that asks could not be created. Blocks for one thread's
 * creation and join. */
int eachobs__may_lower_nice(int want);

#endif /* EACHOBS_NICE_H */
