/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for hak.conf as a correct file reads: every key, the defaults, nodes, volumes,
 * groups, the cluster section (and its own refusals), fencing, authentication, the API that
 * builds a configuration without a file. How a broken file is reported is test_config_errors.
 */
#include <check.h>
#include <sys/socket.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf/config.h"
#include "support/conf_text.h"
#include "transport/hashrun.h"

START_TEST(test_example_file)
{
	struct hak_config *cfg = NULL;
	char err[512] = "";
	const struct hak_volume_cfg *v;

	ck_assert_msg(config_load("etc/hak.conf", &cfg, err, sizeof(err)) == 0,
	              "etc/hak.conf must parse cleanly: %s", err);
	ck_assert_str_eq(cfg->file, "etc/hak.conf");
	ck_assert_str_eq(cfg->control_socket, "/run/hak/hakd.sock");
	ck_assert_int_eq(cfg->log_level, LOG_LVL_INFO);
	ck_assert_int_eq(cfg->io_engine, IO_KIND_AUTO);
	ck_assert_int_eq(cfg->sched_batch, 1);
	ck_assert_uint_eq(cfg->io_depth, 256);
	ck_assert_uint_eq(cfg->max_clients, 64);
	ck_assert_uint_eq(cfg->n_volumes, 1);
	v = config_find_volume(cfg, "db");
	ck_assert_ptr_nonnull(v);
	ck_assert_str_eq(v->backing, "/var/lib/hak/db.img");
	ck_assert_str_eq(v->nbd_socket, "/run/hak/db.nbd");
	ck_assert_ptr_null(v->nbd_listen);
	ck_assert_str_eq(v->description, "Database volume");
	ck_assert_int_eq(v->read_only, 0);
	ck_assert_int_eq(v->direct_io, 0);
	ck_assert_uint_eq(v->block_size_min, 0);
	ck_assert_uint_eq(v->max_payload, 32u << 20);
	ck_assert_int_eq(v->mode, HAK_MODE_SYNC);
	ck_assert(!v->meta_internal);
	ck_assert_str_eq(v->meta_path, "/var/lib/hak/db.meta");
	ck_assert_uint_eq(v->bitmap_block_size, 4096);
	ck_assert_uint_eq(v->port_offset, 0);
	ck_assert_uint_eq(v->async_buffer, 64ull << 20);
	ck_assert_double_eq(v->ping_interval, 1.0);
	ck_assert_double_eq(v->ping_timeout, 2.0);
	ck_assert_double_eq(v->connect_interval, 1.0);
	ck_assert_uint_eq(v->max_epoch_size, 2048);
	ck_assert_ptr_null(cfg->node_name);
	ck_assert_str_eq(cfg->state_dir, "/var/lib/hak");
	ck_assert_uint_eq(cfg->n_nodes, 2);
	ck_assert_str_eq(cfg->nodes[0].name, "alpha");
	ck_assert_str_eq(cfg->nodes[0].address, "192.0.2.1:7789");
	ck_assert_str_eq(cfg->nodes[0].host, "192.0.2.1");
	ck_assert_uint_eq(cfg->nodes[0].port, 7789);
	ck_assert_str_eq(cfg->nodes[0].hostname, "alpha");
	ck_assert_str_eq(cfg->nodes[1].name, "beta");
	ck_assert_str_eq(cfg->nodes[1].address, "192.0.2.2:7789");
	ck_assert_str_eq(cfg->nodes[1].hostname, "beta");
	config_free(cfg);
}
END_TEST

/* Every key set to a value other than its default, so a key stored in the wrong field shows. */
START_TEST(test_all_keys)
{
	const char *text = "# comment line\n"
	                   "global {\n"
	                   "  control-socket /tmp/ctl.sock   # trailing comment\n"
	                   "  control-group hak-ops_2.x\n"
	                   "  log-level debug\n"
	                   "  io-engine pool\n"
	                   "  sched-policy normal\n"
	                   "  io-depth 4096\n"
	                   "  max-clients 1\n"
	                   "  metrics-listen [::1]:9810\n"
	                   "}\n"
	                   "\n"
	                   "volume web.1_a-b {\n"
	                   "\tbacking \"/srv/disk with space.img\"\n"
	                   "\tnbd-socket /run/w.nbd\n"
	                   "\tnbd-listen [::1]:10809\n"
	                   "\tnbd-tls require\n"
	                   "\tnbd-tls-cert-file /etc/hak/nbd.pem\n"
	                   "\tnbd-tls-key-file /etc/hak/nbd.key\n"
	                   "\tnbd-tls-ca-file /etc/hak/ca.pem\n"
	                   "\tnbd-handshake-timeout 5s\n"
	                   "\tdescription \"say \\\"hi\\\" \\\\ bye\"\n"
	                   "\tread-only yes\n"
	                   "\tdirect-io on\n"
	                   "\tblock-size-min 4K\n"
	                   "\tmax-payload 64M\n"
	                   "}\n"
	                   "volume v2 {\n"
	                   "\tbacking /dev/sdb\n"
	                   "\tnbd-socket /run/v2.nbd\n"
	                   "\tnbd-listen 192.168.1.10:1\n"
	                   "\tnbd-tls off\n"
	                   "\tread-only FALSE\n"
	                   "\tdirect-io true\n"
	                   "\tblock-size-min 1\n"
	                   "\tmax-payload 65536\n"
	                   "}\n";
	struct hak_config *cfg = parse_ok(text);
	const struct hak_volume_cfg *a, *b;

	ck_assert_str_eq(cfg->file, "t.conf");
	ck_assert_str_eq(cfg->control_socket, "/tmp/ctl.sock");
	ck_assert_str_eq(cfg->control_group, "hak-ops_2.x");
	ck_assert_int_eq(cfg->control_group_set, 1);
	ck_assert_int_eq(cfg->log_level, LOG_LVL_DEBUG);
	ck_assert_int_eq(cfg->io_engine, IO_KIND_POOL);
	ck_assert_int_eq(cfg->sched_batch, 0);
	ck_assert_uint_eq(cfg->io_depth, 4096);
	ck_assert_uint_eq(cfg->max_clients, 1);
	ck_assert_str_eq(cfg->metrics_listen, "[::1]:9810");
	ck_assert_uint_eq(cfg->n_volumes, 2);
	a = &cfg->volumes[0];
	ck_assert_str_eq(a->name, "web.1_a-b");
	ck_assert_uint_eq(a->line, 13);
	ck_assert_str_eq(a->backing, "/srv/disk with space.img");
	ck_assert_str_eq(a->nbd_socket, "/run/w.nbd");
	ck_assert_str_eq(a->nbd_listen, "[::1]:10809");
	ck_assert_int_eq(a->nbd_tls, HAK_NBD_TLS_REQUIRE);
	ck_assert_str_eq(a->nbd_tls_cert_file, "/etc/hak/nbd.pem");
	ck_assert_str_eq(a->nbd_tls_key_file, "/etc/hak/nbd.key");
	ck_assert_str_eq(a->nbd_tls_ca_file, "/etc/hak/ca.pem");
	ck_assert_ptr_null(a->nbd_tls_psk_file);
	ck_assert_double_eq(a->nbd_handshake_timeout, 5.0);
	ck_assert_str_eq(a->description, "say \"hi\" \\ bye");
	ck_assert_int_eq(a->read_only, 1);
	ck_assert_int_eq(a->direct_io, 1);
	ck_assert_uint_eq(a->block_size_min, 4096);
	ck_assert_uint_eq(a->max_payload, 64u << 20);
	b = config_find_volume(cfg, "v2");
	ck_assert_ptr_eq(b, &cfg->volumes[1]);
	ck_assert_uint_eq(b->line, 28);
	ck_assert_str_eq(b->nbd_listen, "192.168.1.10:1");
	ck_assert_int_eq(b->nbd_tls, HAK_NBD_TLS_OFF);
	ck_assert_ptr_null(b->nbd_tls_cert_file);
	ck_assert_ptr_null(b->description);
	ck_assert_int_eq(b->read_only, 0);
	ck_assert_int_eq(b->direct_io, 1);
	ck_assert_uint_eq(b->block_size_min, 1);
	ck_assert_uint_eq(b->max_payload, 65536);
	config_free(cfg);
}
END_TEST

START_TEST(test_transport_tls)
{
	struct hak_config *cfg =
	    parse_ok("volume c {\n\tbacking /c\n\tnbd-socket /c.nbd\n\ttransport tls\n"
	             "\ttls-ca-file /etc/hak/ca.crt\n\ttls-cert-file /etc/hak/a.crt\n"
	             "\ttls-key-file /etc/hak/a.key\n\ttls-peer-name b.example\n}\n"
	             "volume p {\n\tbacking /p\n\tnbd-socket /p.nbd\n\ttransport tls\n"
	             "\ttls-psk-file /etc/hak/repl.psk\n\ttls-kernel yes\n}\n"
	             "volume t {\n\tbacking /t\n\tnbd-socket /t.nbd\n}\n");
	const struct hak_volume_cfg *c = &cfg->volumes[0], *p = &cfg->volumes[1];
	ck_assert_int_eq(c->transport, HAK_TRANSPORT_TLS);
	ck_assert_str_eq(c->tls_ca_file, "/etc/hak/ca.crt");
	ck_assert_str_eq(c->tls_cert_file, "/etc/hak/a.crt");
	ck_assert_str_eq(c->tls_key_file, "/etc/hak/a.key");
	ck_assert_str_eq(c->tls_peer_name, "b.example");
	ck_assert_ptr_null(c->tls_psk_file);
	ck_assert(!c->tls_kernel); /* opt-in */
	ck_assert(p->tls_kernel);
	ck_assert_int_eq(p->transport, HAK_TRANSPORT_TLS);
	ck_assert_str_eq(p->tls_psk_file, "/etc/hak/repl.psk");
	ck_assert_ptr_null(p->tls_peer_name);
	ck_assert_int_eq(cfg->volumes[2].transport, HAK_TRANSPORT_TCP);
	config_free(cfg);
}
END_TEST

/* The fallback pair is one word, and a build without RDMA accepts it too (it then replicates
 * over TCP, repl.c says so once); plain rdma stays refused there (test_config_errors.c). */
START_TEST(test_transport_rdma_tcp)
{
	struct hak_config *cfg =
	    parse_ok("volume f {\n\tbacking /f\n\tnbd-socket /f.nbd\n\ttransport rdma,tcp\n}\n");
	ck_assert_int_eq(cfg->volumes[0].transport, HAK_TRANSPORT_RDMA_TCP);
	config_free(cfg);
}
END_TEST

/* The replication settings of a volume that sets none of them. */
static void assert_repl_defaults(const struct hak_volume_cfg *v, const char *meta_path)
{
	ck_assert_int_eq(v->mode, HAK_MODE_SYNC);
	ck_assert(!v->meta_internal);
	ck_assert_str_eq(v->meta_path, meta_path);
	ck_assert_uint_eq(v->bitmap_block_size, HAK_DEFAULT_BITMAP_BLOCK);
	ck_assert_uint_eq(v->port_offset, 0);
	ck_assert_uint_eq(v->async_buffer, HAK_DEFAULT_ASYNC_BUFFER);
	ck_assert_double_eq(v->ping_interval, HAK_DEFAULT_PING_INTERVAL);
	ck_assert_double_eq(v->ping_timeout, HAK_DEFAULT_PING_TIMEOUT);
	ck_assert_double_eq(v->connect_interval, HAK_DEFAULT_CONNECT_INTVL);
	ck_assert_uint_eq(v->max_epoch_size, HAK_DEFAULT_MAX_EPOCH);
	ck_assert_int_eq(v->on_io_error, HAK_IOERR_DETACH);
	ck_assert_ptr_null(v->local_io_error_hook);
}

START_TEST(test_defaults)
{
	struct hak_config *cfg = parse_ok(VOL "}\n");
	const struct hak_volume_cfg *v = &cfg->volumes[0];

	ck_assert_str_eq(cfg->control_socket, HAK_DEFAULT_CONTROL_SOCKET);
	ck_assert_str_eq(cfg->control_group, HAK_DEFAULT_CONTROL_GROUP);
	ck_assert_int_eq(cfg->control_group_set, 0);
	ck_assert_int_eq(cfg->log_level, LOG_LVL_INFO);
	ck_assert_int_eq(cfg->io_engine, IO_KIND_AUTO);
	ck_assert_int_eq(cfg->sched_batch, 1);
	ck_assert_uint_eq(cfg->io_depth, HAK_DEFAULT_IO_DEPTH);
	ck_assert_uint_eq(cfg->max_clients, HAK_DEFAULT_MAX_CLIENTS);
	ck_assert_ptr_null(cfg->metrics_listen); /* no metrics endpoint unless asked */
	ck_assert_uint_eq(cfg->n_volumes, 1);
	ck_assert_str_eq(v->name, "v");
	ck_assert_uint_eq(v->line, 1);
	ck_assert_str_eq(v->backing, "/b");
	ck_assert_str_eq(v->nbd_socket, "/s");
	ck_assert_ptr_null(v->nbd_listen);
	ck_assert_ptr_null(v->description);
	ck_assert_int_eq(v->read_only, 0);
	ck_assert_int_eq(v->direct_io, 0);
	ck_assert_uint_eq(v->block_size_min, 0);
	ck_assert_uint_eq(v->max_payload, HAK_DEFAULT_MAX_PAYLOAD);
	ck_assert_int_eq(v->nbd_tls, HAK_NBD_TLS_OFF);
	ck_assert_ptr_null(v->nbd_tls_cert_file);
	ck_assert_ptr_null(v->nbd_tls_key_file);
	ck_assert_ptr_null(v->nbd_tls_ca_file);
	ck_assert_ptr_null(v->nbd_tls_psk_file);
	ck_assert_double_eq(v->nbd_handshake_timeout, HAK_DEFAULT_NBD_HS_TIMEOUT);
	assert_repl_defaults(v, "/var/lib/hak/v.meta");
	ck_assert_ptr_null(cfg->node_name);
	ck_assert_str_eq(cfg->state_dir, HAK_DEFAULT_STATE_DIR);
	ck_assert_uint_eq(cfg->n_nodes, 0);
	ck_assert_ptr_null(cfg->nodes);
	config_free(cfg);

	/* An empty file (or only comments) is all defaults and no volume. */
	cfg = parse_ok("# nothing\n\n   \n");
	ck_assert_uint_eq(cfg->n_volumes, 0);
	ck_assert_ptr_null(cfg->volumes);
	ck_assert_uint_eq(cfg->io_depth, HAK_DEFAULT_IO_DEPTH);
	config_free(cfg);
}
END_TEST

/* Trailing ';', one-line blocks, CRLF line ends and sizes written in several ways. */
START_TEST(test_lenient_syntax)
{
	struct hak_config *cfg = parse_ok("global { log-level warn; io-depth 8; }\r\n"
	                                  "volume a { backing /a; nbd-socket /sa }\r\n"
	                                  "volume b {\r\n"
	                                  "\tbacking /b;\r\n"
	                                  "\tnbd-socket /sb ;\r\n"
	                                  "\tmax-payload 1m\r\n"
	                                  "\tblock-size-min 512;\r\n"
	                                  "\tread-only Off\r\n"
	                                  "};\r\n");

	ck_assert_int_eq(cfg->log_level, LOG_LVL_WARN);
	ck_assert_uint_eq(cfg->io_depth, 8);
	ck_assert_uint_eq(cfg->n_volumes, 2);
	ck_assert_str_eq(cfg->volumes[0].backing, "/a");
	ck_assert_str_eq(cfg->volumes[0].nbd_socket, "/sa");
	ck_assert_str_eq(cfg->volumes[1].nbd_socket, "/sb");
	ck_assert_uint_eq(cfg->volumes[1].max_payload, 1u << 20);
	ck_assert_uint_eq(cfg->volumes[1].block_size_min, 512);
	ck_assert_int_eq(cfg->volumes[1].read_only, 0);
	config_free(cfg);

	/* The text need not be NUL-terminated: the bytes after len are never read. */
	const char text[] = VOL "}\nXXXX";
	struct hak_config *c2 = NULL;
	char err[256];
	ck_assert_int_eq(config_parse(text, sizeof(text) - 1 - 4, "x", &c2, err, sizeof(err)), 0);
	ck_assert_uint_eq(c2->n_volumes, 1);
	config_free(c2);
}
END_TEST

/* Nodes, the global keys of a pair, and every replication key of a volume set to a non-default. */
static const char repl_text[] =
    "global {\n"
    "\tnode beta\n"
    "\tstate-dir /srv/hak/\n"
    "}\n"
    "node alpha {\n"
    "\taddress 192.0.2.1:7789\n"
    "}\n"
    "node beta {\n"
    "\taddress [2001:DB8:0::2]:7790\n"
    "\thostname beta.example.com\n"
    "}\n"
    "volume v {\n"
    "\tbacking /b\n"
    "\tnbd-socket /s\n"
    "\tauth-key-file /etc/hak/repl.key\n"
    "\tmode async\n"
    "\tmeta-disk internal\n"
    "\tbitmap-block-size 1M\n"
    "\treplication-port-offset 5\n"
    "\tasync-buffer 4G\n"
    "\tping-interval 50ms\n"
    "\tping-timeout 1.5s\n"
    "\tconnect-interval 60s\n"
    "\tmax-epoch-size 20000\n"
    "\tafter-split-brain discard-node\n"
    "\tdiscard-node alpha\n"
    "\tsplit-brain-hook /usr/lib/hak/sb-hook\n"
    "\tdata-integrity crc32c\n"
    "\tverify-alg sha256\n"
    "\tcsums after-crash\n"
    "}\n"
    "volume w { backing /c; nbd-socket /t; mode memsync; meta-disk /dev/vg/m;"
    " replication-port-offset 0; ping-interval 0.25s; ping-timeout 251ms;"
    " async-buffer 1M; bitmap-block-size 4k; max-epoch-size 1;"
    " on-io-error pass-on; local-io-error-hook /usr/lib/hak/io-error;"
    " connect-interval 2.000125S; insecure-no-auth yes }\n"
    "volume x { backing /d; nbd-socket /u; replication-port-offset 57745;"
    " auth-key-file /etc/hak/x.key }\n";

START_TEST(test_repl_nodes)
{
	struct hak_config *cfg = parse_ok(repl_text);
	const struct hak_node_cfg *a = &cfg->nodes[0], *b = &cfg->nodes[1];

	ck_assert_str_eq(cfg->node_name, "beta");
	ck_assert_str_eq(cfg->state_dir, "/srv/hak/");
	ck_assert_uint_eq(cfg->n_nodes, 2);
	ck_assert_str_eq(a->name, "alpha");
	ck_assert_str_eq(a->address, "192.0.2.1:7789");
	ck_assert_str_eq(a->hostname, "alpha");
	ck_assert_str_eq(a->host, "192.0.2.1");
	ck_assert_uint_eq(a->port, 7789);
	ck_assert_int_eq(a->family, AF_INET);
	ck_assert_uint_eq(a->line, 5);
	ck_assert_str_eq(b->name, "beta");
	ck_assert_str_eq(b->address, "[2001:DB8:0::2]:7790");
	ck_assert_str_eq(b->hostname, "beta.example.com");
	ck_assert_str_eq(b->host, "2001:db8::2"); /* canonical, so equal addresses compare equal */
	ck_assert_uint_eq(b->port, 7790);
	ck_assert_int_eq(b->family, AF_INET6);
	ck_assert_uint_eq(b->line, 8);
	config_free(cfg);
}
END_TEST

START_TEST(test_repl_volumes)
{
	struct hak_config *cfg = parse_ok(repl_text);
	const struct hak_volume_cfg *v = &cfg->volumes[0], *w = &cfg->volumes[1];

	ck_assert_int_eq(v->mode, HAK_MODE_ASYNC);
	ck_assert(v->meta_internal);
	ck_assert_ptr_null(v->meta_path);
	ck_assert_uint_eq(v->bitmap_block_size, 1u << 20);
	ck_assert_uint_eq(v->port_offset, 5);
	ck_assert_uint_eq(v->async_buffer, 4ull << 30);
	ck_assert_double_eq(v->ping_interval, 0.05);
	ck_assert_double_eq(v->ping_timeout, 1.5);
	ck_assert_double_eq(v->connect_interval, 60.0);
	ck_assert_uint_eq(v->max_epoch_size, 20000);
	ck_assert_int_eq(v->after_sb, SB_POLICY_DISCARD_NODE);
	ck_assert_str_eq(v->sb_discard_node, "alpha");
	ck_assert_str_eq(v->sb_hook, "/usr/lib/hak/sb-hook");
	ck_assert_int_eq(v->data_integrity, 1);
	ck_assert_uint_eq(v->verify_alg, HASH_SHA256);
	ck_assert_int_eq(v->csums, HAK_CSUMS_AFTER_CRASH);

	ck_assert_int_eq(w->mode, HAK_MODE_MEMSYNC);
	ck_assert_int_eq(w->after_sb, SB_POLICY_DISCONNECT);
	ck_assert_ptr_null(w->sb_discard_node);
	ck_assert_ptr_null(w->sb_hook);
	ck_assert_int_eq(w->data_integrity, 0);
	ck_assert(!w->meta_internal);
	ck_assert_str_eq(w->meta_path, "/dev/vg/m");
	ck_assert_uint_eq(w->bitmap_block_size, 4096);
	ck_assert_uint_eq(w->async_buffer, 1u << 20);
	ck_assert_double_eq(w->ping_interval, 0.25);
	ck_assert_double_eq(w->ping_timeout, 0.251);
	ck_assert_double_eq(w->connect_interval, 2.000125);
	ck_assert_uint_eq(w->max_epoch_size, 1);
	ck_assert_uint_eq(w->verify_alg, HASH_CRC32C); /* the defaults */
	ck_assert_int_eq(w->csums, HAK_CSUMS_NO);
	ck_assert_int_eq(w->on_io_error, HAK_IOERR_PASS_ON);
	ck_assert_str_eq(w->local_io_error_hook, "/usr/lib/hak/io-error");
	ck_assert_int_eq(v->on_io_error, HAK_IOERR_DETACH);

	/* The default metadata path comes from state-dir, even when 'global' is first. */
	ck_assert_str_eq(cfg->volumes[2].meta_path, "/srv/hak/x.meta");
	ck_assert_uint_eq(cfg->volumes[2].port_offset, 57745); /* 7790 + 57745 = 65535 */
	ck_assert_str_eq(cfg->volumes[0].auth_key_file, "/etc/hak/repl.key");
	ck_assert_int_eq(cfg->volumes[1].insecure_no_auth, 1);
	ck_assert_ptr_null(cfg->volumes[1].auth_key_file);
	ck_assert_str_eq(cfg->volumes[2].auth_key_file, "/etc/hak/x.key");
	config_free(cfg);

	/* Both nodes on one IP: fine while no port of one node is a port of the other. */
	cfg = parse_ok("node a {\n\taddress 127.0.0.1:7789\n}\n"
	               "node b {\n\taddress 127.0.0.1:7800\n}\n"
	               "volume v { backing /b; nbd-socket /s; insecure-no-auth yes }\n"
	               "volume w { backing /c; nbd-socket /t; replication-port-offset 10;"
	               " insecure-no-auth yes }\n");
	ck_assert_str_eq(cfg->nodes[0].host, cfg->nodes[1].host);
	config_free(cfg);

	/* Without nodes the replication keys are checked but volumes need no distinct offsets. */
	cfg = parse_ok(VOL "\tmode async\n}\nvolume w { backing /c; nbd-socket /t }\n");
	ck_assert_uint_eq(cfg->volumes[0].port_offset, cfg->volumes[1].port_offset);
	config_free(cfg);
}
END_TEST

/* Two nodes (hostnames h1 and h2) and, optionally, a global section. */
static struct hak_config *pair(const char *global, const char *alpha_hostname)
{
	char text[1024];

	snprintf(text, sizeof(text),
	         "%s\nnode alpha {\n\taddress 10.0.0.1:7789\n\thostname \"%s\"\n}\n"
	         "node beta {\n\taddress 10.0.0.2:7789\n\thostname h2\n}\n",
	         global, alpha_hostname);
	return parse_ok(text);
}

START_TEST(test_groups)
{
	struct hak_config *cfg = parse_ok(
	    VOL "}\ngroup pg {\n\tvolume v\n\tmonitor-interval 2s\n\tmax-restarts 5\n"
	        "\trestart-window 1s\n\tresource data {\n\t\ttype mount\n\t\tdevice /dev/x\n"
	        "\t\tdirectory /srv\n\t\tfstype ext4\n\t\toptions noatime\n\t\tfsck no\n\t}\n"
	        "\tresource db {\n\t\ttype exec\n\t\tstart \"pg start\"\n\t\tstop s\n"
	        "\t\tmonitor m\n\t\ttimeout 90s\n\t\tpidfile /srv/pid\n\t}\n\tresource u {\n"
	        "\t\ttype systemd\n\t\tunit x.service\n\t}\n\tresource ip {\n\t\ttype vip\n"
	        "\t\taddress 192.0.2.10/24\n\t\tinterface eth0\n\t}\n\tresource ip6 {\n"
	        "\t\ttype vip\n\t\taddress 2001:db8::10/64\n\t\tinterface svc.1\n"
	        "\t\tgarp-count 0\n\t\tgarp-delay 0s\n\t}\n}\n");
	const struct hak_group_cfg *g;

	ck_assert_uint_eq(cfg->groups.n, 1);
	g = cfg->groups.g[0];
	ck_assert_str_eq(g->name, "pg");
	ck_assert_str_eq(g->volume, "v");
	ck_assert_double_eq(g->monitor_interval, 2.0);
	ck_assert_uint_eq(g->max_restarts, 5);
	ck_assert_double_eq(g->restart_window, 1.0);
	ck_assert_uint_eq(g->n_res, 5);
	ck_assert_str_eq(g->res[0]->name, "data");
	ck_assert_int_eq(g->res[0]->type, RES_MOUNT);
	ck_assert_str_eq(g->res[0]->options, "noatime");
	ck_assert_int_eq(g->res[0]->fsck, 0);
	ck_assert_int_eq(g->res[0]->force_unmount, 1);
	ck_assert_double_eq(g->res[0]->timeout, HAK_DEFAULT_RES_TIMEOUT);
	ck_assert_str_eq(g->res[1]->start, "pg start");
	ck_assert_double_eq(g->res[1]->timeout, 90.0);
	ck_assert_str_eq(g->res[1]->pidfile, "/srv/pid");
	ck_assert_ptr_null(g->res[0]->pidfile);
	ck_assert_str_eq(g->res[2]->unit, "x.service");
	ck_assert_int_eq(g->res[3]->type, RES_VIP);
	ck_assert_str_eq(g->res[3]->address, "192.0.2.10/24");
	ck_assert_str_eq(g->res[3]->interface, "eth0");
	ck_assert_uint_eq(g->res[3]->garp_count, HAK_DEFAULT_GARP_COUNT);
	ck_assert_double_eq(g->res[3]->garp_delay, HAK_DEFAULT_GARP_DELAY);
	ck_assert_str_eq(g->res[4]->address, "2001:db8::10/64");
	ck_assert_uint_eq(g->res[4]->garp_count, 0);
	ck_assert_double_eq(g->res[4]->garp_delay, 0.0);
	config_free(cfg);
}
END_TEST

START_TEST(test_group_volumes)
{
	struct hak_config *cfg =
	    parse_ok(VOL "}\n" VOLW "group g {\n\tvolume v w\n\tresource a {\n\t\ttype attach\n"
	                 "\t\tdirectory /d1\n\t\tlink /l1\n\t}\n\tresource b {\n\t\ttype attach\n"
	                 "\t\tvolume w\n\t\tdirectory /d2\n\t\tlink /l2\n\t}\n}\n");
	const struct hak_group_cfg *g = cfg->groups.g[0];

	ck_assert_uint_eq(g->n_volumes, 2);
	ck_assert_str_eq(g->volumes[0], "v");
	ck_assert_str_eq(g->volumes[1], "w");
	ck_assert_ptr_eq(g->volume, g->volumes[0]);
	/* an attach resource without a volume key attaches the group's first */
	ck_assert_str_eq(g->res[0]->volume, "v");
	ck_assert_str_eq(g->res[1]->volume, "w");
	config_free(cfg);
	/* one volume, as before: the list has one entry */
	cfg = parse_ok(VOL "}\ngroup g {\n\tvolume v\n" RES_SD "}\n");
	g = cfg->groups.g[0];
	ck_assert_uint_eq(g->n_volumes, 1);
	ck_assert_str_eq(g->volume, "v");
	ck_assert_ptr_null(g->res[0]->volume);
	config_free(cfg);
}
END_TEST

START_TEST(test_find_self)
{
	const struct hak_node_cfg *self, *peer;
	struct hak_config *cfg;
	char host[256] = "", err[512];

	ck_assert_int_eq(gethostname(host, sizeof(host) - 1), 0);
	ck_assert_msg(strcmp(host, "h1") && strcmp(host, "h2"), "the test needs another hostname");

	/* By the machine's hostname. */
	cfg = pair("", host);
	ck_assert_int_eq(config_find_self(cfg, NULL, &self, &peer, err, sizeof(err)), 0);
	ck_assert_str_eq(self->name, "alpha");
	ck_assert_str_eq(peer->name, "beta");
	ck_assert_str_eq(err, "");
	/* --node wins over the hostname. */
	ck_assert_int_eq(config_find_self(cfg, "beta", &self, &peer, err, sizeof(err)), 0);
	ck_assert_ptr_eq(self, &cfg->nodes[1]);
	ck_assert_ptr_eq(peer, &cfg->nodes[0]);
	int rc = config_find_self(cfg, "gamma", &self, &peer, err, sizeof(err)), e = errno;
	ck_assert_int_eq(rc, -1);
	ck_assert_int_eq(e, ENOENT);
	ck_assert_ptr_null(self);
	ck_assert_ptr_null(peer);
	ck_assert_msg(strstr(err, "hakd --node 'gamma' names no node of t.conf; the nodes are "
	                          "'alpha' (hostname ") &&
	                  strstr(err, "and 'beta' (hostname h2)") && strstr(err, host),
	              "%s", err);
	config_free(cfg);

	/* The global 'node' wins over the hostname, and --node over both. */
	cfg = pair("global {\n\tnode beta\n}", host);
	ck_assert_int_eq(config_find_self(cfg, NULL, &self, &peer, err, sizeof(err)), 0);
	ck_assert_str_eq(self->name, "beta");
	ck_assert_int_eq(config_find_self(cfg, "alpha", &self, &peer, err, sizeof(err)), 0);
	ck_assert_str_eq(self->name, "alpha");
	config_free(cfg);

	/* No node has this machine's hostname; a longer name does not match a shorter one. */
	char longer[300];
	snprintf(longer, sizeof(longer), "%.50s.example", host);
	cfg = pair("", longer);
	rc = config_find_self(cfg, NULL, &self, &peer, err, sizeof(err));
	e = errno;
	ck_assert_int_eq(rc, -1);
	ck_assert_int_eq(e, ENOENT);
	ck_assert_msg(strstr(err, "This machine's hostname '") && strstr(err, host) &&
	                  strstr(err, "is not the hostname of a node of t.conf, which are 'alpha' "
	                              "(hostname ") &&
	                  strstr(err, "--node NAME."),
	              "%s", err);
	/* Without an error buffer it still fails cleanly. */
	ck_assert_int_eq(config_find_self(cfg, NULL, &self, &peer, NULL, 0), -1);
	config_free(cfg);

	/* Standalone: no pair, unless --node asks for one. */
	cfg = parse_ok(VOL "}\n");
	self = peer = (const struct hak_node_cfg *)cfg;
	ck_assert_int_eq(config_find_self(cfg, NULL, &self, &peer, err, sizeof(err)), 0);
	ck_assert_ptr_null(self);
	ck_assert_ptr_null(peer);
	rc = config_find_self(cfg, "alpha", &self, &peer, err, sizeof(err));
	e = errno;
	ck_assert_int_eq(rc, -1);
	ck_assert_int_eq(e, ENOENT);
	ck_assert_msg(strstr(err, "t.conf has 0 node sections, but a pair needs two") &&
	                  strstr(err, host) && strstr(err, "leave out hakd --node"),
	              "%s", err);
	config_free(cfg);
}
END_TEST

/* A pair with two heartbeat paths and a cluster section; HB_B is node b's address list. */
#define CLUSTER_PAIR(hb_a, hb_b, cluster)                                                          \
	"node a {\n\taddress 10.0.0.1:7789\n\theartbeat-address " hb_a "\n}\n"                     \
	"node b {\n\taddress 10.0.0.2:7789\n\theartbeat-address " hb_b "\n}\n"                     \
	"cluster {\n" cluster "}\n"
#define KEYFILE "\tauth-key-file /etc/hak/cluster.key\n"

START_TEST(test_cluster_section)
{
	struct hak_config *cfg = parse_ok(
	    CLUSTER_PAIR("10.0.0.1:7790 [2001:db8::1]:7790", "10.0.0.2:7790 [2001:db8::2]:7791",
	                 "\tcluster-id 42\n\theartbeat-interval 100ms\n\tdeadtime 500ms\n" KEYFILE
	                 "\ton-quorum-loss demote\n\ton-disk-failure failover\n"
	                 "\tpreferred-node b\n"));
	const struct hak_cluster_cfg *c = &cfg->cluster;

	ck_assert(c->present);
	ck_assert_uint_eq(c->cluster_id, 42);
	ck_assert_double_eq(c->heartbeat_interval, 0.1);
	ck_assert_double_eq(c->deadtime, 0.5);
	ck_assert_str_eq(c->auth_key_file, "/etc/hak/cluster.key");
	ck_assert_int_eq(c->on_quorum_loss, HAK_QL_DEMOTE);
	ck_assert_int_eq(c->on_disk_failure, HAK_DF_FAILOVER);
	ck_assert_str_eq(c->preferred_node, "b");
	ck_assert_uint_eq(c->line, 9);
	ck_assert_uint_eq(cfg->nodes[0].n_heartbeat, 2);
	ck_assert_str_eq(cfg->nodes[0].heartbeat[0].host, "10.0.0.1");
	ck_assert_uint_eq(cfg->nodes[0].heartbeat[0].port, 7790);
	ck_assert_int_eq(cfg->nodes[0].heartbeat[0].family, AF_INET);
	ck_assert_str_eq(cfg->nodes[1].heartbeat[1].host, "2001:db8::2");
	ck_assert_uint_eq(cfg->nodes[1].heartbeat[1].port, 7791);
	ck_assert_int_eq(cfg->nodes[1].heartbeat[1].family, AF_INET6);
	config_free(cfg);
	/* defaults */
	cfg = parse_ok(
	    CLUSTER_PAIR("10.0.0.1:7790 10.1.0.1:7790", "10.0.0.2:7790 10.1.0.2:7790", KEYFILE));
	ck_assert_uint_eq(cfg->cluster.cluster_id, 1);
	ck_assert_double_eq(cfg->cluster.heartbeat_interval, 0.2);
	ck_assert_double_eq(cfg->cluster.deadtime, 1.0);
	ck_assert_int_eq(cfg->cluster.on_quorum_loss, HAK_QL_FREEZE);
	ck_assert_int_eq(cfg->cluster.on_disk_failure, HAK_DF_DETACH);
	ck_assert_ptr_null(cfg->cluster.preferred_node);
	config_free(cfg);
	/* without a cluster section: nothing of it */
	cfg = parse_ok(NODES);
	ck_assert(!cfg->cluster.present && cfg->nodes[0].n_heartbeat == 0);
	config_free(cfg);
}
END_TEST

#define FPAIR(cluster)                                                                             \
	CLUSTER_PAIR("10.0.0.1:7790 10.1.0.1:7790", "10.0.0.2:7790 10.1.0.2:7790", cluster)
#define FVOL(extra) FVOLN("v", extra)
#define FVOLN(name, extra)                                                                         \
	"volume " name " {\n\tbacking /b" name "\n\tnbd-socket /s" name "\n" extra "}\n"

/* fencing: the default follows the cluster section and the mode; what cannot work is refused. */
START_TEST(test_fencing)
{
	struct hak_config *cfg = parse_ok(
	    FPAIR(KEYFILE) FVOL("") FVOLN("w", "\tmode async\n\treplication-port-offset 1\n")
	        FVOLN("x", "\treplication-port-offset 2\n\tfencing none\n\tfence-timeout 3s\n"));

	ck_assert_int_eq(cfg->volumes[0].fencing, HAK_FENCING_RESOURCE_ONLY);
	ck_assert_double_eq(cfg->volumes[0].fence_timeout, 10.0);
	ck_assert_int_eq(cfg->volumes[1].fencing, HAK_FENCING_NONE);
	ck_assert_int_eq(cfg->volumes[2].fencing, HAK_FENCING_NONE);
	ck_assert_double_eq(cfg->volumes[2].fence_timeout, 3.0);
	ck_assert_str_eq(config_fencing_name(cfg->volumes[0].fencing), "resource-only");
	config_free(cfg);
	/* the cluster manager drives every volume: a second sync volume is fenced too */
	cfg = parse_ok(FPAIR(KEYFILE) FVOL("") FVOLN("w", "\treplication-port-offset 1\n"));
	ck_assert_int_eq(cfg->volumes[0].fencing, HAK_FENCING_RESOURCE_ONLY);
	ck_assert_int_eq(cfg->volumes[1].fencing, HAK_FENCING_RESOURCE_ONLY);
	config_free(cfg);
	cfg = parse_ok(NODES FVOL("\tinsecure-no-auth yes\n"));
	ck_assert_int_eq(cfg->volumes[0].fencing, HAK_FENCING_NONE);
	config_free(cfg);
	cfg = parse_ok(FPAIR(KEYFILE "\tfence-hook /bin/true\n")
	                   FVOL("\tfencing resource-and-stonith\n"));
	ck_assert_int_eq(cfg->volumes[0].fencing, HAK_FENCING_STONITH);
	config_free(cfg);
	/* without a cluster section, a fence-peer handler (Pacemaker) makes resource-only the
	 * default of a sync volume, and allows it */
	cfg = parse_ok(
	    NODES FVOL("\tinsecure-no-auth yes\n\tfence-peer /usr/sbin/hak-crm-fence-peer\n"
	               "\tunfence-peer /usr/sbin/hak-crm-unfence-peer\n")
	        FVOLN("w", "\tinsecure-no-auth yes\n\treplication-port-offset 1\n"
	                   "\tmode async\n\tfence-peer /f\n")
	            FVOLN("x", "\tinsecure-no-auth yes\n\treplication-port-offset 2\n"
	                       "\tfencing resource-only\n\tfence-peer /f\n"));
	ck_assert_int_eq(cfg->volumes[0].fencing, HAK_FENCING_RESOURCE_ONLY);
	ck_assert_str_eq(cfg->volumes[0].fence_peer, "/usr/sbin/hak-crm-fence-peer");
	ck_assert_str_eq(cfg->volumes[0].unfence_peer, "/usr/sbin/hak-crm-unfence-peer");
	ck_assert_int_eq(cfg->volumes[1].fencing, HAK_FENCING_NONE);
	ck_assert_ptr_null(cfg->volumes[1].unfence_peer);
	ck_assert_int_eq(cfg->volumes[2].fencing, HAK_FENCING_RESOURCE_ONLY);
	config_free(cfg);
}
END_TEST

/* A pair replicates only with a peer that proves it holds a key, unless told otherwise. */
START_TEST(test_auth)
{
	char err[512];
	struct hak_config *cfg = NULL;

	ck_assert_int_eq(parse(NODES FVOL(""), &cfg, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "t.conf:7:1: volume 'v' would replicate with whoever connects"),
	              "%s", err);
	ck_assert_int_eq(parse(NODES FVOL("\tauth-key-file /k\n\tinsecure-no-auth yes\n"), &cfg,
	                       err, sizeof(err)),
	                 -1);
	ck_assert_msg(strstr(err, "t.conf:11:19: volume 'v' has both auth-key-file and "
	                          "insecure-no-auth yes"),
	              "%s", err);
	cfg = parse_ok(NODES FVOL("\tinsecure-no-auth yes\n"));
	ck_assert_int_eq(cfg->volumes[0].insecure_no_auth, 1);
	ck_assert_ptr_null(cfg->volumes[0].auth_key_file);
	config_free(cfg);
	cfg = parse_ok(NODES FVOL("\tauth-key-file /etc/hak/v.key\n"));
	ck_assert_str_eq(cfg->volumes[0].auth_key_file, "/etc/hak/v.key");
	config_free(cfg);
	/* the cluster's key is the default; a volume's own wins */
	cfg = parse_ok(FPAIR(KEYFILE) FVOL("") FVOLN("w", "\treplication-port-offset 1\n"
	                                                  "\tauth-key-file /etc/hak/w.key\n"));
	ck_assert_str_eq(cfg->volumes[0].auth_key_file, "/etc/hak/cluster.key");
	ck_assert_str_eq(cfg->volumes[1].auth_key_file, "/etc/hak/w.key");
	config_free(cfg);
	/* standalone volumes replicate with nobody */
	cfg = parse_ok(VOL "}\n");
	ck_assert_ptr_null(cfg->volumes[0].auth_key_file);
	config_free(cfg);
}
END_TEST

static const struct bad_case cluster_bad[] = {
    /* one group with a cluster, holding the first volume (group g starts on line 21) */
    {FPAIR(KEYFILE) FVOL("")
         FVOLN("w", "\treplication-port-offset 1\n") "group g {\n\tvolume v\n" RES_SD
                                                     "}\ngroup h {\n\tvolume w\n\tresource s "
                                                     "{\n\t\ttype systemd\n\t\tunit u\n\t}\n}\n",
     28, 1,
     "Group 'h' is a second group, but the cluster manager fails every volume over together"},
    {FPAIR(KEYFILE) FVOL("")
         FVOLN("w", "\treplication-port-offset 1\n") "group g {\n\tvolume w\n" RES_SD "}\n",
     21, 1, "Group 'g' does not hold the first volume 'v'"},
    {NODES FVOL("\tfencing resource-only\n"), 10, 10,
     "fencing resource-only of volume 'v' needs a cluster section"},
    {FPAIR(KEYFILE) FVOL("\tfencing resource-and-stonith\n"), 15, 10,
     "needs a fence-hook in the cluster section"},
    {NODES FVOL("\tunfence-peer /u\n"), 10, 15,
     "unfence-peer of volume 'v' lifts what fence-peer did, and there is no fence-peer"},
    {FPAIR(KEYFILE) FVOL("\tfence-peer /f\n"), 15, 13,
     "fence-peer of volume 'v' is for a pair without a cluster section"},
    {NODES FVOL("\tfence-peer /f\n\tfencing resource-and-stonith\n"), 11, 10,
     "fencing resource-and-stonith of volume 'v' needs a cluster section and its fence-hook"},
    {FPAIR(KEYFILE) FVOL("\tfencing always\n"), 15, 10,
     "Bad fencing 'always'; choose one of none, resource-only, resource-and-stonith."},
    {NODES "cluster {\n}\n", 7, 1, "has no 'auth-key-file'"},
    {"cluster {\n" KEYFILE "}\n", 1, 1, "needs the two 'node NAME {' sections"},
    {"node a {\n\taddress 10.0.0.1:7789\n\theartbeat-address 10.0.0.1:7790 10.1.0.1:7790\n}\n"
     "node b {\n\taddress 10.0.0.2:7789\n}\n",
     3, 20, "used only by the cluster manager; add a 'cluster { auth-key-file PATH }'"},
    {CLUSTER_PAIR("10.0.0.1:7790", "10.0.0.2:7790", KEYFILE), 3, 20,
     "Node 'a' has 1 heartbeat paths; the cluster needs at least two"},
    {CLUSTER_PAIR("10.0.0.1:7790 10.1.0.1:7790", "10.0.0.2:7790 10.1.0.2:7790 10.2.0.2:7790",
                  KEYFILE),
     7, 20, "Node 'b' has 3 heartbeat addresses and node 'a' has 2"},
    {CLUSTER_PAIR("10.0.0.1:7790 10.1.0.1:7790", "10.0.0.2:7790 [2001:db8::2]:7790", KEYFILE), 7,
     20, "Heartbeat path 2 joins an IPv4 address of node 'a' to an IPv6 address of node 'b'"},
    {CLUSTER_PAIR("10.0.0.1:7790 10.1.0.1:7790", "10.0.0.2:7790 10.1.0.1:7790", KEYFILE), 7, 20,
     "Heartbeat path 2 has the same address 10.1.0.1 port 7790 on both nodes"},
    {CLUSTER_PAIR("10.0.0.1:7790 10.1.0.1:7790", "10.0.0.2:7790 10.1.0.2:7790",
                  KEYFILE "\tdeadtime 400ms\n"),
     11, 11, "deadtime 0.4s must be more than twice heartbeat-interval 0.2s"},
    {CLUSTER_PAIR("0.0.0.0:7790 10.1.0.1:7790", "10.0.0.2:7790 10.1.0.2:7790", KEYFILE), 3, 20,
     "heartbeat-address '0.0.0.0:7790' of node 'a' is the wildcard address"},
    {CLUSTER_PAIR("alpha:7790 10.1.0.1:7790", "10.0.0.2:7790 10.1.0.2:7790", KEYFILE), 3, 20,
     "heartbeat-address 'alpha:7790' of node 'a' has a host name"},
    {CLUSTER_PAIR("10.0.0.1:7790 10.0.0.1:7790", "10.0.0.2:7790 10.1.0.2:7790", KEYFILE), 3, 34,
     "heartbeat-address '10.0.0.1:7790' of node 'a' is listed twice"},
    {CLUSTER_PAIR("10.0.0.1:1 10.0.0.1:2 10.0.0.1:3 10.0.0.1:4 10.0.0.1:5 10.0.0.1:6 10.0.0.1:7 "
                  "10.0.0.1:8 10.0.0.1:9",
                  "10.0.0.2:7790 10.1.0.2:7790", KEYFILE),
     3, 108, "lists more than 8 heartbeat addresses"},
    {CLUSTER_PAIR("10.0.0.1:7790 10.1.0.1:0", "10.0.0.2:7790 10.1.0.2:7790", KEYFILE), 3, 34,
     "port '0' is not valid"},
    {CLUSTER_PAIR("10.0.0.1:7790 10.1.0.1:7790", "10.0.0.2:7790 10.1.0.2:7790",
                  KEYFILE "\ton-quorum-loss panic\n"),
     11, 17, "Bad on-quorum-loss 'panic'; choose one of freeze, demote."},
    {CLUSTER_PAIR("10.0.0.1:7790 10.1.0.1:7790", "10.0.0.2:7790 10.1.0.2:7790",
                  KEYFILE "\ton-disk-failure ignore\n"),
     11, 18, "Bad on-disk-failure 'ignore'; choose one of detach, failover."},
    {CLUSTER_PAIR("10.0.0.1:7790 10.1.0.1:7790", "10.0.0.2:7790 10.1.0.2:7790",
                  KEYFILE "\tpreferred-node c\n"),
     11, 17, "preferred-node 'c' is not a node; the nodes are a and b."},
    {CLUSTER_PAIR("10.0.0.1:7790 10.1.0.1:7790", "10.0.0.2:7790 10.1.0.2:7790",
                  KEYFILE "\tcluster-id 0\n"),
     11, 13, "cluster-id 0 is out of range"},
    {CLUSTER_PAIR("10.0.0.1:7790 10.1.0.1:7790", "10.0.0.2:7790 10.1.0.2:7790",
                  KEYFILE) "cluster {\n}\n",
     12, 1, "A second 'cluster' section"},
    {"node a {\n\taddress 10.0.0.1:7789\n\thostname x y\n}\n", 3, 13,
     "Key 'hostname' takes one value but has 2"},
};

START_TEST(test_cluster_bad)
{
	for (size_t i = 0; i < sizeof(cluster_bad) / sizeof(cluster_bad[0]); i++) {
		const struct bad_case *bc = &cluster_bad[i];
		struct hak_config *cfg = NULL;
		char err[512], want[64];
		int rc = parse(bc->text, &cfg, err, sizeof(err));

		ck_assert_msg(rc == -1 && errno == EINVAL && cfg == NULL, "case %zu: parsed", i);
		snprintf(want, sizeof(want), "t.conf:%u:%u: ", bc->line, bc->col);
		ck_assert_msg(strncmp(err, want, strlen(want)) == 0 && strstr(err, bc->phrase),
		              "case %zu: want %s... '%s' in: %s", i, want, bc->phrase, err);
	}
}
END_TEST

START_TEST(test_load)
{
	char path[] = "/tmp/test_config_XXXXXX", err[512];
	struct hak_config *cfg = NULL;
	int fd = mkstemp(path);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, VOL "}\n", strlen(VOL "}\n")), (int)strlen(VOL "}\n"));
	close(fd);
	ck_assert_int_eq(config_load(path, &cfg, err, sizeof(err)), 0);
	ck_assert_str_eq(cfg->file, path);
	ck_assert_str_eq(cfg->volumes[0].backing, "/b");
	config_free(cfg);
	unlink(path);

	int rc = config_load(path, &cfg, err, sizeof(err)), e = errno;
	ck_assert_int_eq(rc, -1);
	ck_assert_int_eq(e, ENOENT);
	ck_assert_ptr_null(cfg);
	ck_assert_ptr_nonnull(strstr(err, path));
	ck_assert_ptr_nonnull(strstr(err, strerror(ENOENT)));

	rc = config_load("/", &cfg, err, sizeof(err));
	e = errno;
	ck_assert_int_eq(rc, -1);
	ck_assert_int_eq(e, EISDIR);
}
END_TEST

/* errno of a config_add_volume() that must fail, or 0 if it did not fail. */
static int add_errno(struct hak_config *cfg, const char *name, const char *backing)
{
	struct hak_volume_cfg *v;

	errno = 0;
	v = config_add_volume(cfg, name, backing);
	return v ? 0 : errno;
}

START_TEST(test_api)
{
	struct hak_config *cfg = config_new_default();
	struct hak_volume_cfg *v;
	char name[16], backing[] = "/dev/x";

	ck_assert_ptr_nonnull(cfg);
	ck_assert_ptr_null(cfg->file);
	ck_assert_str_eq(cfg->control_socket, HAK_DEFAULT_CONTROL_SOCKET);
	ck_assert_int_eq(cfg->log_level, LOG_LVL_INFO);
	ck_assert_int_eq(cfg->io_engine, IO_KIND_AUTO);
	ck_assert_int_eq(cfg->sched_batch, 1);
	ck_assert_uint_eq(cfg->io_depth, 256);
	ck_assert_uint_eq(cfg->max_clients, 64);
	ck_assert_uint_eq(cfg->n_volumes, 0);
	ck_assert_uint_eq(cfg->n_nodes, 0);
	ck_assert_ptr_null(cfg->nodes);
	ck_assert_ptr_null(cfg->node_name);
	ck_assert_str_eq(cfg->state_dir, "/var/lib/hak");
	ck_assert_ptr_null(config_find_volume(cfg, "a"));

	v = config_add_volume(cfg, "a", backing);
	ck_assert_ptr_nonnull(v);
	ck_assert_str_eq(v->name, "a");
	ck_assert_str_eq(v->backing, "/dev/x");
	ck_assert_ptr_ne(v->backing, backing);
	ck_assert_ptr_null(v->nbd_socket);
	ck_assert_uint_eq(v->max_payload, HAK_DEFAULT_MAX_PAYLOAD);
	ck_assert_uint_eq(v->block_size_min, 0);
	ck_assert_int_eq(v->read_only, 0);
	assert_repl_defaults(v, "/var/lib/hak/a.meta");

	ck_assert_int_eq(add_errno(cfg, "a", "/other"), EEXIST);
	ck_assert_int_eq(add_errno(cfg, "a b", "/other"), EINVAL);
	ck_assert_int_eq(add_errno(cfg, "..", "/other"), EINVAL);
	ck_assert_int_eq(add_errno(cfg, "c", NULL), EINVAL);
	ck_assert_uint_eq(cfg->n_volumes, 1);

	/* Growing the array moves it; lookups must still find every volume. */
	for (int i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "vol%d", i);
		ck_assert_ptr_nonnull(config_add_volume(cfg, name, name));
	}
	ck_assert_uint_eq(cfg->n_volumes, 101);
	ck_assert_str_eq(config_find_volume(cfg, "a")->backing, "/dev/x");
	ck_assert_str_eq(config_find_volume(cfg, "vol57")->backing, "vol57");
	ck_assert_ptr_eq(config_find_volume(cfg, "vol99"), &cfg->volumes[100]);
	ck_assert_ptr_null(config_find_volume(cfg, "vol100"));
	ck_assert_ptr_null(config_find_volume(cfg, NULL));
	ck_assert_ptr_null(config_find_volume(NULL, "a"));

	/* The default metadata file follows the state directory, with or without a final '/'. */
	free(cfg->state_dir);
	cfg->state_dir = strdup("/srv/st/");
	v = config_add_volume(cfg, "b", "/dev/b");
	ck_assert_str_eq(v->meta_path, "/srv/st/b.meta");
	free(cfg->state_dir);
	cfg->state_dir = strdup("/");
	ck_assert_str_eq(config_add_volume(cfg, "c", "/dev/c")->meta_path, "/c.meta");

	ck_assert_str_eq(config_mode_name(HAK_MODE_SYNC), "sync");
	ck_assert_str_eq(config_mode_name(HAK_MODE_MEMSYNC), "memsync");
	ck_assert_str_eq(config_mode_name(HAK_MODE_ASYNC), "async");
	ck_assert_str_eq(config_mode_name((enum hak_repl_mode)7), "unknown");
	config_free(cfg);
}
END_TEST

static Suite *config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_example_file);
	tcase_add_test(tc, test_all_keys);
	tcase_add_test(tc, test_transport_tls);
	tcase_add_test(tc, test_transport_rdma_tcp);
	tcase_add_test(tc, test_defaults);
	tcase_add_test(tc, test_lenient_syntax);
	tcase_add_test(tc, test_repl_nodes);
	tcase_add_test(tc, test_repl_volumes);
	tcase_add_test(tc, test_groups);
	tcase_add_test(tc, test_group_volumes);
	tcase_add_test(tc, test_find_self);
	tcase_add_test(tc, test_cluster_section);
	tcase_add_test(tc, test_cluster_bad);
	tcase_add_test(tc, test_fencing);
	tcase_add_test(tc, test_auth);
	tcase_add_test(tc, test_load);
	tcase_add_test(tc, test_api);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(config_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
