/* SPDX-License-Identifier: MIT */
/*
 * JSON shapes that several status producers share, so `hakctl status` reads the same way
 * whichever module fills it.
 */
#ifndef HAK_STATJSON_H
#define HAK_STATJSON_H

#include <jansson.h>

#include "lib/lathist.h"

/*
 * A latency histogram as {"count", "sum_us", "mean_us", "p50_us", "p99_us", "buckets"}: buckets
 * lists the non-empty ones as [upper bound in us, count] (the bound null for the last, open one);
 * a consumer that wants rates of change reads two samples and subtracts. NULL: out of memory.
 */
json_t *statjson_lathist(const struct lathist *h);

#endif
