/* SPDX-License-Identifier: MIT */
/* An IPv4 or IPv6 address with a prefix length, as the configuration writes it and the virtual IP
 * resource adds it to an interface. Pure parsing and formatting, shared by conf/ and cluster/. */
#ifndef HAK_IPADDR_H
#define HAK_IPADDR_H

#include <netinet/in.h>
#include <stddef.h>

#define IPADDR_TEXT_MAX (INET6_ADDRSTRLEN + 5)

struct ipaddr {
	int family; /* AF_INET or AF_INET6 */
	union {
		struct in_addr v4;
		struct in6_addr v6;
	} a;
	unsigned prefixlen;
};

/*
 * "192.0.2.10/24" or "2001:db8::10/64" (without /N: a host address, /32 or /128). Returns 0, or
 * -1 with errno EINVAL and a sentence in err.
 */
int ipaddr_parse(const char *text, struct ipaddr *out, char *err, size_t errlen);
/* "192.0.2.10/24"; buf of IPADDR_TEXT_MAX bytes. Returns buf. */
const char *ipaddr_format(const struct ipaddr *a, char *buf, size_t len);

#endif
