/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the vip module's pure parts: address parsing and formatting, and the exact
 * bytes of the gratuitous ARP and the unsolicited neighbour advertisement (with its checksum
 * verified independently). Adding, removing and announcing on real interfaces is
 * tests/integration/t_vip.sh.
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cluster/vip.h"

static const uint8_t mac[6] = {0x02, 0x00, 0x5e, 0x10, 0x20, 0x30};

START_TEST(parse_and_format)
{
	static const struct {
		const char *in, *out;
	} ok[] = {
	    {"192.0.2.10/24", "192.0.2.10/24"},     {"192.0.2.10", "192.0.2.10/32"},
	    {"2001:db8::10/64", "2001:db8::10/64"}, {"2001:DB8:0::10", "2001:db8::10/128"},
	    {"10.0.0.1/1", "10.0.0.1/1"},
	};
	static const char *const bad[] = {"",
	                                  "/24",
	                                  "192.0.2.10/",
	                                  "192.0.2.10/0",
	                                  "192.0.2.10/33",
	                                  "2001:db8::1/129",
	                                  "192.0.2/24",
	                                  "vip.example",
	                                  "192.0.2.10/24x",
	                                  "192.0.2.10/-1"};
	struct ipaddr a;
	char buf[IPADDR_TEXT_MAX], err[256];

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		ck_assert_msg(ipaddr_parse(ok[i].in, &a, err, sizeof(err)) == 0, "%s: %s", ok[i].in,
		              err);
		ck_assert_str_eq(ipaddr_format(&a, buf, sizeof(buf)), ok[i].out);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(ipaddr_parse(bad[i], &a, err, sizeof(err)) == -1, "'%s' parsed",
		              bad[i]);
		ck_assert_int_eq(errno, EINVAL);
		ck_assert_ptr_nonnull(strstr(err, "like 192.0.2.10/24"));
	}
}
END_TEST

START_TEST(gratuitous_arp_bytes)
{
	static const uint8_t want[28] = {0x00, 0x01, 0x08, 0x00, 6,   4, 0x00, 0x01, 0x02, 0x00,
	                                 0x5e, 0x10, 0x20, 0x30, 192, 0, 2,    10,   0,    0,
	                                 0,    0,    0,    0,    192, 0, 2,    10};
	struct ipaddr a;
	uint8_t buf[128];
	char err[256];

	ck_assert_int_eq(ipaddr_parse("192.0.2.10/24", &a, err, sizeof(err)), 0);
	ck_assert_uint_eq(vip_frame_build(&a, mac, buf, sizeof(buf)), 28);
	ck_assert_int_eq(memcmp(buf, want, sizeof(want)), 0);
	ck_assert_uint_eq(vip_frame_build(&a, mac, buf, 27), 0);
}
END_TEST

/* The ones' complement sum over pseudo-header and ICMPv6 message must be 0xffff. */
static uint16_t verify_sum(const uint8_t *ip6)
{
	uint32_t sum = 0;
	uint16_t plen = (uint16_t)(ip6[4] << 8 | ip6[5]);

	for (int i = 8; i < 40; i += 2)
		sum += (uint32_t)(ip6[i] << 8 | ip6[i + 1]);
	sum += plen;
	sum += ip6[6];
	for (int i = 0; i < plen; i += 2)
		sum += (uint32_t)(ip6[40 + i] << 8 | ip6[40 + i + 1]);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

START_TEST(neighbour_advertisement_bytes)
{
	struct ipaddr a;
	struct in6_addr dst;
	uint8_t buf[128];
	char err[256];

	ck_assert_int_eq(ipaddr_parse("2001:db8::10/64", &a, err, sizeof(err)), 0);
	ck_assert_uint_eq(vip_frame_build(&a, mac, buf, sizeof(buf)), 72);
	ck_assert_uint_eq(buf[0] >> 4, 6);
	ck_assert_uint_eq(buf[4] << 8 | buf[5], 32); /* payload length */
	ck_assert_uint_eq(buf[6], 58);
	ck_assert_uint_eq(buf[7], 255);
	ck_assert_int_eq(memcmp(buf + 8, &a.a.v6, 16), 0); /* from the VIP */
	inet_pton(AF_INET6, "ff02::1", &dst);
	ck_assert_int_eq(memcmp(buf + 24, &dst, 16), 0);
	ck_assert_uint_eq(buf[40], 136);
	ck_assert_uint_eq(buf[41], 0);
	ck_assert_uint_eq(buf[44], 0x20); /* Override; neither Router nor Solicited */
	ck_assert_int_eq(memcmp(buf + 48, &a.a.v6, 16), 0);
	ck_assert_uint_eq(buf[64], 2);
	ck_assert_uint_eq(buf[65], 1);
	ck_assert_int_eq(memcmp(buf + 66, mac, 6), 0);
	ck_assert_uint_eq(verify_sum(buf), 0xffff);
	buf[70] ^= 1; /* the checksum covers the option too */
	ck_assert_uint_ne(verify_sum(buf), 0xffff);
	ck_assert_uint_eq(vip_frame_build(&a, mac, buf, 71), 0);
	a.family = AF_UNIX;
	ck_assert_uint_eq(vip_frame_build(&a, mac, buf, sizeof(buf)), 0);
}
END_TEST

START_TEST(missing_interface)
{
	struct ipaddr a;
	char err[256];

	ck_assert_int_eq(ipaddr_parse("192.0.2.10/24", &a, err, sizeof(err)), 0);
	/* nothing to remove from an interface that does not exist */
	ck_assert_int_eq(vip_remove("hak-nosuch0", &a, err, sizeof(err)), 0);
	ck_assert_int_eq(vip_add("hak-nosuch0", &a, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, ENODEV);
	ck_assert_ptr_nonnull(strstr(err, "Cannot add 192.0.2.10/24: interface hak-nosuch0"));
	ck_assert_int_eq(vip_present("hak-nosuch0", &a, err, sizeof(err)), -1);
}
END_TEST

static Suite *vip_suite(void)
{
	Suite *s = suite_create("vip");
	TCase *tc = tcase_create("pure");

	tcase_add_test(tc, parse_and_format);
	tcase_add_test(tc, gratuitous_arp_bytes);
	tcase_add_test(tc, neighbour_advertisement_bytes);
	tcase_add_test(tc, missing_interface);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(vip_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
