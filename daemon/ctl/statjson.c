/* SPDX-License-Identifier: MIT */
/* Shared status JSON shapes: see statjson.h. */
#include "statjson.h"

json_t *statjson_lathist(const struct lathist *h)
{
	json_t *buckets = json_array();
	json_t *o = NULL;
	if (!buckets)
		goto out;
	for (unsigned i = 0; i < LATHIST_BUCKETS; i++) {
		if (!h->bucket[i])
			continue;
		uint64_t bound = lathist_bound_us(i);
		json_t *pair = json_pack(
		    "[o, I]", bound == UINT64_MAX ? json_null() : json_integer((json_int_t)bound),
		    (json_int_t)h->bucket[i]);
		if (!pair || json_array_append_new(buckets, pair) < 0)
			goto out;
	}
	o = json_pack("{s:I, s:I, s:f, s:I, s:I, s:O}", "count", (json_int_t)h->count, "sum_us",
	              (json_int_t)(h->sum_ns / 1000), "mean_us", lathist_mean_us(h), "p50_us",
	              (json_int_t)lathist_quantile_us(h, 0.5), "p99_us",
	              (json_int_t)lathist_quantile_us(h, 0.99), "buckets", buckets);
out:
	json_decref(buckets);
	return o;
}
