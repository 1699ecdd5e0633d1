/* SPDX-License-Identifier: MIT */
/*
 * What sending a payload without a copy would cost hak's RDMA transport, against the copy it
 * makes: ibv_reg_mr + ibv_dereg_mr of a buffer (zero-copy of an NBD write buffer that lives only
 * for one request, so nothing can be cached) against memcpy of the same bytes into an already
 * registered pool buffer. Built and run by bench/rdma_design.sh, not by make check:
 *
 *   rdma_regcost [ITERATIONS]
 *
 * Prints one line per size: RESULT regcost size=<bytes> reg_dereg_ns=<x> memcpy_ns=<y>, the
 * median over 5 batches of the mean per operation. Where no RDMA device opens (this machine's
 * own kernel has no RDMA module) it still times memcpy, the real CPU's against the emulated
 * guest's, prints reg_dereg_ns=none, and exits with status 2.
 */
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BATCHES 5

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Median over BATCHES of the mean ns of one reg+dereg of buf: the value, or -1 on a failure. */
static double time_reg(struct ibv_pd *pd, void *buf, size_t size, int iters)
{
	double per[BATCHES];
	for (int b = 0; b < BATCHES; b++) {
		double t0 = now_ns();
		for (int i = 0; i < iters; i++) {
			struct ibv_mr *mr = ibv_reg_mr(pd, buf, size, IBV_ACCESS_LOCAL_WRITE);
			if (!mr) {
				perror("ibv_reg_mr");
				return -1;
			}
			ibv_dereg_mr(mr);
		}
		per[b] = (now_ns() - t0) / iters;
	}
	qsort(per, BATCHES, sizeof(per[0]), cmp_double);
	return per[BATCHES / 2];
}

/* The same for one memcpy of size bytes from src into dst. */
static double time_copy(void *dst, const void *src, size_t size, int iters)
{
	double per[BATCHES];
	for (int b = 0; b < BATCHES; b++) {
		double t0 = now_ns();
		for (int i = 0; i < iters; i++) {
			memcpy(dst, src, size);
			/* Keep the copy: the compiler may not drop it as dead. */
			__asm__ volatile("" : : "r"(dst) : "memory");
		}
		per[b] = (now_ns() - t0) / iters;
	}
	qsort(per, BATCHES, sizeof(per[0]), cmp_double);
	return per[BATCHES / 2];
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = {4096, 65536, 1048576};
	int iters = argc > 1 ? atoi(argv[1]) : 1000, rc = 1, n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_context *ctx = NULL;
	struct ibv_pd *pd = NULL;
	uint8_t *src = NULL, *dst = NULL;
	if (iters <= 0)
		iters = 1000;
	src = aligned_alloc(4096, sizes[2]);
	dst = aligned_alloc(4096, sizes[2]);
	if (!src || !dst) {
		perror("aligned_alloc");
		goto out;
	}
	/* Touched first: neither measurement should pay the first page faults. */
	memset(src, 0xa5, sizes[2]);
	memset(dst, 0x5a, sizes[2]);
	if (list && n > 0)
		ctx = ibv_open_device(list[0]);
	if (ctx && !(pd = ibv_alloc_pd(ctx))) {
		perror("ibv_alloc_pd");
		goto out;
	}
	if (pd)
		printf("device %s, %d iterations per batch, median of %d batches\n",
		       ibv_get_device_name(list[0]), iters, BATCHES);
	else
		fprintf(stderr,
		        "rdma_regcost: no RDMA device could be opened (%d listed): memcpy only\n",
		        n);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		/* Large registrations are slow; fewer of them keep the run short. */
		int it = sizes[i] >= 1048576 ? (iters / 4 > 0 ? iters / 4 : 1) : iters;
		double reg = pd ? time_reg(pd, src, sizes[i], it) : 0;
		if (reg < 0)
			goto out;
		double cp = time_copy(dst, src, sizes[i], it);
		if (pd)
			printf("RESULT regcost size=%zu reg_dereg_ns=%.0f memcpy_ns=%.0f\n",
			       sizes[i], reg, cp);
		else
			printf("RESULT regcost size=%zu reg_dereg_ns=none memcpy_ns=%.0f\n",
			       sizes[i], cp);
	}
	if (!pd) {
		rc = 2;
		goto out;
	}
	rc = 0;
out:
	free(src);
	free(dst);
	if (pd)
		ibv_dealloc_pd(pd);
	if (ctx)
		ibv_close_device(ctx);
	if (list)
		ibv_free_device_list(list);
	return rc;
}
