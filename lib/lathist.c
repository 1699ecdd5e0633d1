/* SPDX-License-Identifier: MIT */
/* A latency histogram in powers of two of microseconds: see lathist.h. */
#include "lathist.h"

static unsigned bucket_of(uint64_t us)
{
	if (us <= 1)
		return 0;
	/* (2^(i-1), 2^i] -> i: the bit length of us - 1 */
	unsigned i = 64 - (unsigned)__builtin_clzll(us - 1);
	return i < LATHIST_BUCKETS ? i : LATHIST_BUCKETS - 1;
}

void lathist_add(struct lathist *h, int64_t ns)
{
	uint64_t v = ns > 0 ? (uint64_t)ns : 0;
	h->count++;
	h->sum_ns += v;
	h->bucket[bucket_of((v + 999) / 1000)]++;
}

uint64_t lathist_bound_us(unsigned i)
{
	if (i >= LATHIST_BUCKETS - 1)
		return UINT64_MAX;
	return (uint64_t)1 << i;
}

double lathist_mean_us(const struct lathist *h)
{
	return h->count ? (double)h->sum_ns / 1000.0 / (double)h->count : 0.0;
}

uint64_t lathist_quantile_us(const struct lathist *h, double q)
{
	if (!h->count)
		return 0;
	/* the rank of the q-quantile, 1-based, rounded up: q = 1 is the largest */
	double want = q * (double)h->count;
	uint64_t rank = (uint64_t)want;
	if ((double)rank < want || rank == 0)
		rank++;
	uint64_t seen = 0;
	for (unsigned i = 0; i < LATHIST_BUCKETS - 1; i++) {
		seen += h->bucket[i];
		if (seen >= rank)
			return lathist_bound_us(i);
	}
	return lathist_bound_us(LATHIST_BUCKETS - 2) * 2;
}

void lathist_merge(struct lathist *h, const struct lathist *o)
{
	h->count += o->count;
	h->sum_ns += o->sum_ns;
	for (unsigned i = 0; i < LATHIST_BUCKETS; i++)
		h->bucket[i] += o->bucket[i];
}
