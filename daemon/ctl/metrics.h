/* SPDX-License-Identifier: MIT */
/*
 * The Prometheus metrics endpoint (global "metrics-listen"): hakd's status in the text
 * exposition format 0.0.4, served over HTTP from the main loop (metrics_http.h).
 *
 * The metrics are a second view of the status object `hakctl status --json` prints, rendered
 * from it at every scrape: one source of truth, so a metric and the status can never disagree,
 * and ctl/ stays below the modules that own the state. docs/metrics.md lists every metric.
 */
#ifndef HAK_METRICS_H
#define HAK_METRICS_H

#include <jansson.h>
#include <stddef.h>

/* The status object of this moment (a new reference), or NULL when it cannot be built. */
typedef json_t *(*metrics_status_fn)(void *ctx);

/*
 * Render status (the shape of `hakctl status --json`) as exposition text: a malloc'ed,
 * NUL-terminated buffer of *len bytes, or NULL with errno ENOMEM. start_time is the process's
 * start in seconds since the epoch.
 */
char *metrics_render(const json_t *status, double start_time, size_t *len);

/* When this process started, in seconds since the epoch (from /proc); 0 if unknown. */
double metrics_process_start_time(void);

struct ev_loop;
struct metrics;

/*
 * Serve GET /metrics on addr from loop, each scrape rendering status(ctx). Returns 0, or -1 with
 * errno and a sentence in err.
 */
int metrics_start(struct ev_loop *loop, const char *addr, metrics_status_fn status, void *ctx,
                  struct metrics **out, char *err, size_t errlen);
/* m may be NULL. */
void metrics_stop(struct metrics *m);

#endif
