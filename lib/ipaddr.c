/* SPDX-License-Identifier: MIT */
#include "ipaddr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ipaddr_parse(const char *text, struct ipaddr *out, char *err, size_t errlen)
{
	char host[INET6_ADDRSTRLEN + 1];
	const char *slash = strchr(text, '/');
	size_t hlen = slash ? (size_t)(slash - text) : strlen(text);
	unsigned long plen;
	char *end;

	memset(out, 0, sizeof(*out));
	if (hlen == 0 || hlen >= sizeof(host))
		goto bad;
	memcpy(host, text, hlen);
	host[hlen] = '\0';
	if (inet_pton(AF_INET, host, &out->a.v4) == 1)
		out->family = AF_INET;
	else if (inet_pton(AF_INET6, host, &out->a.v6) == 1)
		out->family = AF_INET6;
	else
		goto bad;
	out->prefixlen = out->family == AF_INET ? 32 : 128;
	if (!slash)
		return 0;
	errno = 0;
	plen = strtoul(slash + 1, &end, 10);
	if (errno || end == slash + 1 || *end || plen < 1 || plen > out->prefixlen)
		goto bad;
	out->prefixlen = (unsigned)plen;
	return 0;
bad:
	snprintf(err, errlen,
	         "'%.80s' is not an IP address with an optional prefix length, like 192.0.2.10/24 "
	         "or 2001:db8::10/64.",
	         text);
	errno = EINVAL;
	return -1;
}

const char *ipaddr_format(const struct ipaddr *a, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";

	inet_ntop(a->family, &a->a, host, sizeof(host));
	snprintf(buf, len, "%s/%u", host, a->prefixlen);
	return buf;
}

/* ---- netlink ---- */
