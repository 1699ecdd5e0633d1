/* SPDX-License-Identifier: MIT */
/*
 * hak-rtt: the floor under a synchronous replicated write, for bench/replication.sh. One client
 * sends a frame (8-byte header and SIZE bytes), one server reads it whole, optionally writes it
 * into FILE (buffered, at a pseudo-random page-aligned offset, as a secondary applies a write)
 * and answers with a 24-byte ack, like hak's WRITE_ACK. Plain blocking sockets with TCP_NODELAY
 * and no event loop or worker threads: what is left when replication adds nothing of its own.
 *
 *   hak-rtt serve PORT [FILE]            one connection, until the client closes it
 *   hak-rtt ping HOST PORT SIZE COUNT    prints "rtt_us median=M mean=A p99=P count=N"
 *
 * Every read and write gives up after 10 s (SO_RCVTIMEO/SO_SNDTIMEO), so a lost peer cannot
 * hang a benchmark. Exit status: 0 success, 1 failure (message on stderr), 2 usage.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/endian.h"

#define HDR_SIZE  8u
#define ACK_SIZE  24u
#define MAX_SIZE  (1u << 20)
#define MAX_COUNT 1000000u

static int sock_opts(int fd)
{
	struct timeval tv = {.tv_sec = 10};
	int one = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
		return -1;
	return 0;
}

/* 1 when len bytes were read, 0 at a clean end of stream before the first byte, -1 on error. */
static int read_full(int fd, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t r = read(fd, (char *)buf + got, len - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0) {
			if (got)
				errno = EPROTO;
			return got ? -1 : 0;
		}
		got += (size_t)r;
	}
	return 1;
}

static int write_full(int fd, const void *buf, size_t len)
{
	size_t put = 0;

	while (put < len) {
		ssize_t r = write(fd, (const char *)buf + put, len - put);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		put += (size_t)r;
	}
	return 0;
}

/* Write a received frame inside the file (never past its end), at a page-aligned offset that a
 * multiplicative hash of the sequence number spreads over it, as random writes would land. */
static int write_somewhere(int fd, const char *buf, uint32_t len, uint64_t fsize, uint64_t seq,
                           const char *path)
{
	if (len > fsize) {
		fprintf(stderr, "hak-rtt: a %u-byte frame does not fit in %s (%llu bytes).\n", len,
		        path, (unsigned long long)fsize);
		return -1;
	}
	off_t off = (off_t)((seq * 2654435761u) % ((fsize - len) / 4096 + 1) * 4096);
	if (pwrite(fd, buf, len, off) != (ssize_t)len) {
		fprintf(stderr, "hak-rtt: writing %u bytes at %lld to %s failed: %s.\n", len,
		        (long long)off, path, strerror(errno));
		return -1;
	}
	return 0;
}

static int serve(const char *port, const char *path)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port))};
	int ls = -1, c = -1, fd = -1, one = 1, rc = 1, r;
	uint8_t hdr[HDR_SIZE], ack[ACK_SIZE] = {0};
	uint64_t fsize = 0, seq = 0;
	char *buf = malloc(MAX_SIZE);

	if (!buf)
		goto out;
	if (path) {
		struct stat st;
		fd = open(path, O_WRONLY);
		if (fd < 0 || fstat(fd, &st) < 0 || st.st_size < 4096) {
			fprintf(stderr, "hak-rtt: cannot use %s as the target file: %s.\n", path,
			        fd < 0 ? strerror(errno) : "smaller than one page");
			goto out;
		}
		fsize = (uint64_t)st.st_size;
	}
	ls = socket(AF_INET, SOCK_STREAM, 0);
	if (ls < 0 || setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(ls, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(ls, 1) < 0) {
		fprintf(stderr, "hak-rtt: cannot listen on port %s: %s.\n", port, strerror(errno));
		goto out;
	}
	c = accept(ls, NULL, NULL);
	if (c < 0 || sock_opts(c) < 0) {
		fprintf(stderr, "hak-rtt: accepting the client failed: %s.\n", strerror(errno));
		goto out;
	}
	while ((r = read_full(c, hdr, HDR_SIZE)) == 1) {
		uint32_t len = be_get32(hdr);
		if (len > MAX_SIZE) {
			fprintf(stderr, "hak-rtt: the client sent a %u-byte frame (at most %u).\n",
			        len, MAX_SIZE);
			goto out;
		}
		if (read_full(c, buf, len) != 1) {
			fprintf(stderr, "hak-rtt: reading a %u-byte frame failed: %s.\n", len,
			        strerror(errno));
			goto out;
		}
		if (fd >= 0 && len && write_somewhere(fd, buf, len, fsize, seq++, path) < 0)
			goto out;
		memcpy(ack, hdr, HDR_SIZE);
		if (write_full(c, ack, ACK_SIZE) < 0) {
			fprintf(stderr, "hak-rtt: sending an ack failed: %s.\n", strerror(errno));
			goto out;
		}
	}
	if (r < 0)
		fprintf(stderr, "hak-rtt: reading a frame header failed: %s.\n", strerror(errno));
	else
		rc = 0;
out:
	if (c >= 0)
		close(c);
	if (ls >= 0)
		close(ls);
	if (fd >= 0)
		close(fd);
	free(buf);
	return rc;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static int connect_retry(const char *host, const char *port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port))};
	int s = -1;

	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
		fprintf(stderr, "hak-rtt: '%s' is not an IPv4 address.\n", host);
		return -1;
	}
	/* The server may still be starting: up to 10 s of attempts, 50 ms apart. */
	for (int i = 0; i < 200; i++) {
		s = socket(AF_INET, SOCK_STREAM, 0);
		if (s < 0)
			break;
		if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return s;
		close(s);
		s = -1;
		usleep(50000);
	}
	fprintf(stderr, "hak-rtt: cannot connect to %s:%s: %s.\n", host, port, strerror(errno));
	return -1;
}

static int ping(const char *host, const char *port, unsigned size, unsigned count)
{
	int s = -1, rc = 1;
	uint8_t *frame = calloc(1, HDR_SIZE + size), ack[ACK_SIZE];
	double *lat = calloc(count, sizeof(*lat)), sum = 0;

	if (!frame || !lat)
		goto out;
	s = connect_retry(host, port);
	if (s < 0 || sock_opts(s) < 0)
		goto out;
	be_put32(frame, (uint32_t)size);
	for (size_t i = HDR_SIZE; i < HDR_SIZE + size; i++)
		frame[i] = (uint8_t)(i * 131);
	for (unsigned i = 0; i < count; i++) {
		double t0 = clock_mono();
		int r =
		    write_full(s, frame, HDR_SIZE + size) < 0 ? -1 : read_full(s, ack, ACK_SIZE);
		if (r != 1) {
			fprintf(stderr, "hak-rtt: round trip %u of %u failed: %s.\n", i + 1, count,
			        r == 0 ? "the server closed the connection" : strerror(errno));
			goto out;
		}
		lat[i] = (clock_mono() - t0) * 1e6;
		sum += lat[i];
	}
	qsort(lat, count, sizeof(*lat), cmp_double);
	printf("rtt_us median=%.1f mean=%.1f p99=%.1f count=%u\n", lat[count / 2], sum / count,
	       lat[(size_t)count * 99 / 100], count);
	rc = 0;
out:
	if (s >= 0)
		close(s);
	free(frame);
	free(lat);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && argc <= 4 && strcmp(argv[1], "serve") == 0)
		return serve(argv[2], argc == 4 ? argv[3] : NULL);
	if (argc == 6 && strcmp(argv[1], "ping") == 0) {
		unsigned long size = strtoul(argv[4], NULL, 10), count = strtoul(argv[5], NULL, 10);
		if (size <= MAX_SIZE && count >= 1 && count <= MAX_COUNT)
			return ping(argv[2], argv[3], (unsigned)size, (unsigned)count);
	}
	fprintf(stderr,
	        "usage: hak-rtt serve PORT [FILE] | hak-rtt ping HOST PORT SIZE COUNT "
	        "(SIZE at most %u, COUNT 1..%u)\n",
	        MAX_SIZE, MAX_COUNT);
	return 2;
}
