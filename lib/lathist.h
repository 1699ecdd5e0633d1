/* SPDX-License-Identifier: MIT */
/*
 * A latency histogram: a count, a sum and buckets in powers of two of microseconds, cheap enough
 * to feed on every request of the data path (one bit scan and three additions). Status shows the
 * mean and quantiles read from it; Prometheus-style consumers take the cumulative buckets. A
 * bucket's bound is 2^i us, so a quantile read from it is an upper bound, at most twice the
 * value: enough to tell a 60 us round trip from a 2 ms flush, which is what it is for.
 */
#ifndef HAK_LATHIST_H
#define HAK_LATHIST_H

#include <stdint.h>

/* Bucket i counts latencies in (2^(i-1), 2^i] us; bucket 0 those up to 1 us, the last one
 * everything above 2^(LATHIST_BUCKETS-2) us (about 4.2 s). */
#define LATHIST_BUCKETS 24

struct lathist {
	uint64_t count;
	uint64_t sum_ns;
	uint64_t bucket[LATHIST_BUCKETS];
};

/* Count one latency of ns nanoseconds (negative: a clock read out of order, counted as 0). */
void lathist_add(struct lathist *h, int64_t ns);

/* The upper bound, in us, of bucket i (UINT64_MAX for the last, open one). */
uint64_t lathist_bound_us(unsigned i);

/* Mean in us (0 when empty). */
double lathist_mean_us(const struct lathist *h);

/* The bound of the bucket that holds the q-quantile (0 < q <= 1), in us; 0 when empty. For the
 * last, open bucket: the mean of what it holds is unknown, so the bound below it times two. */
uint64_t lathist_quantile_us(const struct lathist *h, double q);

/* h += o: one histogram for several sources (every volume of a node, say). */
void lathist_merge(struct lathist *h, const struct lathist *o);

#endif
