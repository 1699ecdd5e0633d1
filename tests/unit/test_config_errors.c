/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for how a broken hak.conf is reported: a table of bad inputs, each with the exact
 * file:line:column and phrase of its one-line message; the limits on hostile input (NUL bytes,
 * long lines, big files, many volumes); a small or missing error buffer; and config_check_all(),
 * which reports every error of a file for hakctl check-config.
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
#include "support/heard.h"

static const struct bad_case bad_cases[] = {
    /* sections */
    {"volum x {\n}\n", 1, 1, "Unknown section 'volum'; did you mean 'volume'?"},
    {"\n  frobnicate {\n}\n", 2, 3, "valid sections are: global, node, cluster, volume, group."},
    {"volume {\n}\n", 1, 1, "needs a name; write 'volume NAME {'"},
    {"global g {\n}\n", 1, 8, "takes no name"},
    {"global {\n}\nglobal {\n}\n", 3, 1, "second 'global' section; the first is at line 1"},
    {"volume a/b {\n}\n", 1, 8, "Bad volume name 'a/b'"},
    {"volume \"\" {\n}\n", 1, 8, "Bad volume name"},
    {"volume .. {\n}\n", 1, 8, "Bad volume name"},
    {"volume "
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa {\n}\n",
     1, 8, "use 1 to 64 letters"},
    {VOL "}\nvolume v {\n\tbacking /c\n\tnbd-socket /t\n}\n", 5, 8,
     "Duplicate volume name 'v'; the first is at line 1"},
    {VOL "\tvolume x {\n\t}\n}\n", 4, 2, "cannot be inside volume 'v'"},
    {"volume a b {\n}\n", 1, 10, "Too many words in the section header"},
    {"volume v\n{\n}\n", 1, 1, "header must end with '{'"},
    {"backing /x\n", 1, 1, "'backing' is outside any section"},
    {"a {\na {\na {\na {\na {\na {\na {\na {\na {\n", 9, 1, "nested more than 8 deep"},
    /* keys */
    {VOL "\tbakcing /c\n}\n", 4, 2, "Unknown key 'bakcing' in volume 'v'; did you mean 'backing'?"},
    {VOL "\tnbd-sockt /c\n}\n", 4, 2, "did you mean 'nbd-socket'?"},
    {VOL "\tzzzzzz 1\n}\n", 4, 2, "Unknown key 'zzzzzz' in volume 'v'; valid keys are: backing, "},
    {"global {\n\tlog-levl info\n}\n", 2, 2, "in global; did you mean 'log-level'?"},
    {"global {\n\tbacking /x\n}\n", 2, 2, "'backing' belongs in a 'volume' section, not in global"},
    {VOL "\tbacking /c\n}\n", 4, 2,
     "Duplicate key 'backing' in volume 'v'; it is already set at line 2"},
    {"volume v {\n\tbacking /b\n}\n", 1, 1, "has no 'nbd-socket'"},
    {"\n volume v {\n\tnbd-socket /s\n}\n", 2, 2, "volume 'v' section has no 'backing'"},
    {VOL "\tread-only\n}\n", 4, 2, "'read-only' in volume 'v' needs a value: yes or no"},
    {"volume v {\n\tbacking\n\tnbd-socket /s\n}\n", 2, 2, "needs a value: an absolute path"},
    {"global {\n\tio-depth ;\n}\n", 2, 2, "needs a value: a number from 8 to 4096"},
    {VOL "\tmax-payload\n}\n", 4, 2, "needs a value: a size from 64K to 64M"},
    {"global {\n\tlog-level\n}\n", 2, 2, "needs a value: one of err, warn, notice, info, debug"},
    {VOL "\tnbd-listen\n}\n", 4, 2, "needs a value: HOST:PORT, like 0.0.0.0:10809"},
    {VOL "\tdescription\n}\n", 4, 2, "needs a value: a text, in double quotes if it has spaces"},
    {VOL "\tkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk 1\n}\n", 4, 2,
     "valid keys are: backing, nbd-socket, nbd-listen, description, nbd-tls, "
     "nbd-tls-cert-file, nbd-tls-key-file, nbd-tls-ca-file, nbd-tls-psk-file, "
     "nbd-handshake-timeout, read-only, direct-io, "
     "block-size-min, max-payload, mode, meta-disk, bitmap-block-size, "
     "replication-port-offset, "
     "async-buffer, ping-interval, ping-timeout, connect-interval, max-epoch-size, "
     "after-split-brain, discard-node, split-brain-hook, data-integrity, verify-alg, "
     "csums, "
     "on-io-error, local-io-error-hook, al-extents, al-extent-size, resync-rate-max, "
     "resync-rate-min, resync-fill-target, fencing, fence-timeout, fence-peer, unfence-peer, "
     "auth-key-file, "
     "insecure-no-auth, transport, tls-ca-file, tls-cert-file, tls-key-file, "
     "tls-peer-name, tls-psk-file, tls-kernel."},
    {VOL "\tal-extents 10\n}\n", 4, 13,
     "al-extents 10 of volume 'v' is too small; use 0 to turn the activity log off or 64 to "
     "12292."},
    {VOL "\tal-extent-size 3M\n}\n", 4, 17, "3M is not a power of two"},
    {VOL "\tdescription a b\n}\n", 4, 16, "takes one value but has 2"},
    {VOL "\tdescription 1 2 3 4 5 6 7 8 9 a b c d e f g h\n}\n", 4, 46, "Too many values"},
    {"global {\n\t\"log-level\" info\n}\n", 2, 2, "not a quoted string"},
    {"global {\n\tcontrol-group -x\n}\n", 2, 16, "Bad control-group '-x'; use a group name"},
    {"global {\n\tcontrol-group a:b\n}\n", 2, 16, "Bad control-group 'a:b'"},
    {"global {\n\tcontrol-group aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n}\n", 2, 16, "1 to 32 letters"},
    /* sizes */
    {VOL "\tmax-payload 12X\n}\n", 4, 14, "expected a size like 4096, 64K or 32M"},
    {VOL "\tmax-payload K\n}\n", 4, 14, "Bad size 'K'"},
    {VOL "\tmax-payload 1KB\n}\n", 4, 14, "Bad size '1KB'"},
    {VOL "\tmax-payload -1\n}\n", 4, 14, "Bad size"},
    {VOL "\tmax-payload 99999999999999999999\n}\n", 4, 14, "Bad size"},
    {VOL "\tmax-payload 99999999999T\n}\n", 4, 14, "Bad size"},
    {VOL "\tmax-payload 32K\n}\n", 4, 14, "max-payload 32K is out of range; use 64K to 64M"},
    {VOL "\tmax-payload 65M\n}\n", 4, 14, "out of range; use 64K to 64M"},
    {VOL "\tblock-size-min 3000\n}\n", 4, 17, "block-size-min 3000 is not a power of two"},
    {VOL "\tblock-size-min 128K\n}\n", 4, 17, "out of range; use 1 to 64K"},
    {VOL "\tblock-size-min 0\n}\n", 4, 17, "out of range"},
    {VOL "\tblock-size-min 64K\n\tmax-payload 96K\n}\n", 5, 2,
     "max-payload 96K of volume 'v' is not a multiple of its minimum block size 64K"},
    /* booleans, enums, numbers */
    {VOL "\tread-only maybe\n}\n", 4, 12, "Bad boolean 'maybe' for read-only; use yes or no"},
    {VOL "\tdirect-io 1\n}\n", 4, 12, "Bad boolean"},
    {"global {\n\tlog-level loud\n}\n", 2, 12,
     "Bad log-level 'loud'; choose one of err, warn, notice, info, debug"},
    {"global {\n\tio-engine epoll\n}\n", 2, 12, "choose one of auto, uring, pool"},
    {"global {\n\tsched-policy fifo\n}\n", 2, 15,
     "Bad sched-policy 'fifo'; choose one of batch, normal"},
    {"global {\n\tio-depth 7\n}\n", 2, 11, "io-depth 7 is out of range; use 8 to 4096"},
    {"global {\n\tio-depth 4097\n}\n", 2, 11, "out of range; use 8 to 4096"},
    {"global {\n\tio-depth 1K\n}\n", 2, 11, "Bad number '1K' for io-depth"},
    {"global {\n\tio-depth -8\n}\n", 2, 11, "Bad number"},
    {"global {\n\tmax-clients 0\n}\n", 2, 14, "use 1 to 1024"},
    {"global {\n\tmax-clients 1025\n}\n", 2, 14, "use 1 to 1024"},
    /* addresses and paths */
    {VOL "\tnbd-listen localhost\n}\n", 4, 13, "is not HOST:PORT (no ':PORT')"},
    {VOL "\tnbd-listen ::1:10809\n}\n", 4, 13, "IPv6 address must be in brackets"},
    {VOL "\tnbd-listen [::1]10809\n}\n", 4, 13, "no ':PORT' after ']'"},
    {VOL "\tnbd-listen [::1:80\n}\n", 4, 13, "no ']' after the IPv6 address"},
    {VOL "\tnbd-listen [zz]:80\n}\n", 4, 13, "not an IPv6 address"},
    {VOL "\tnbd-listen :80\n}\n", 4, 13, "the host is empty"},
    {"global {\n\tmetrics-listen 9810\n}\n", 2, 17, "is not HOST:PORT (no ':PORT')"},
    {VOL "\tnbd-listen [1111:2222:3333:4444:5555:6666:7777:8888:9999:aaaa]:80\n}\n", 4, 13,
     "the IPv6 address is too long"},
    {VOL "\tnbd-listen a+b:80\n}\n", 4, 13, "character not allowed"},
    {VOL "\tnbd-listen host:0\n}\n", 4, 13, "port '0' is not valid; use a number from 1 to 65535"},
    {VOL "\tnbd-listen host:65536\n}\n", 4, 13, "from 1 to 65535"},
    {VOL "\tnbd-listen host:http\n}\n", 4, 13, "port 'http' is not valid"},
    {VOL "\tnbd-listen [::1]:\n}\n", 4, 13, "port '' is not valid"},
    {"volume v {\n\tbacking b.img\n\tnbd-socket /s\n}\n", 2, 10,
     "backing 'b.img' must be an absolute path"},
    {"volume v {\n\tbacking /b\n\tnbd-socket "
     "/xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
     "xxxx"
     "xxxxxxxxxxxxxxxxxxxx\n}\n",
     3, 13, "a UNIX socket path may be at most 107 bytes"},
    {"global {\n\tcontrol-socket run/x\n}\n", 2, 17, "must be an absolute path"},
    /* cross-volume and cross-section */
    {VOL "}\nvolume w {\n\tbacking /b\n\tnbd-socket /t\n}\n", 6, 10,
     "Volume 'w' has the same backing '/b' as volume 'v' (line 1)"},
    {VOL "}\nvolume w {\n\tbacking /c\n\tnbd-socket /s\n}\n", 7, 13, "same nbd-socket '/s'"},
    {VOL "\tnbd-listen h:1\n\tnbd-tls off\n}\nvolume w {\n\tbacking /c\n\tnbd-socket "
         "/t\n\tnbd-listen h:1\n\tnbd-tls off\n}\n",
     10, 13, "same nbd-listen 'h:1'"},
    /* NBD over TLS */
    {VOL "\tnbd-listen h:1\n}\n", 4, 13,
     "listens on TCP h:1 without saying whether NBD clients use TLS; add 'nbd-tls require'"},
    {VOL "\tnbd-tls require\n\tnbd-tls-psk-file /p\n}\n", 4, 10,
     "has 'nbd-tls require' but no nbd-listen"},
    {VOL "\tnbd-tls on\n}\n", 4, 10, "has nbd-tls on but no credentials"},
    {VOL "\tnbd-tls-psk-file /p\n}\n", 1, 1, "has nbd-tls files but nbd-tls is off"},
    {VOL "\tnbd-tls on\n\tnbd-tls-cert-file /c\n}\n", 4, 10,
     "needs both nbd-tls-cert-file and nbd-tls-key-file"},
    {VOL "\tnbd-tls on\n\tnbd-tls-cert-file /c\n\tnbd-tls-key-file /k\n\tnbd-tls-psk-file "
         "/p\n}\n",
     4, 10, "has both a certificate and nbd-tls-psk-file"},
    {VOL "\tnbd-tls on\n\tnbd-tls-psk-file /p\n\tnbd-tls-ca-file /a\n}\n", 4, 10,
     "has nbd-tls-ca-file without a certificate"},
    {VOL "\tnbd-tls maybe\n}\n", 4, 10, "off, on, require"},
    {VOL "\tnbd-handshake-timeout 10ms\n}\n", 4, 24, "nbd-handshake-timeout"},
    {VOL "}\nglobal {\n\tcontrol-socket /s\n}\n", 3, 13, "is the control socket '/s'"},
    /* nodes */
    {"node {\n}\n", 1, 1, "A 'node' section needs a name; write 'node NAME {'."},
    {"node a/b {\n}\n", 1, 6, "Bad node name 'a/b'"},
    {"node a b {\n}\n", 1, 8, "Too many words in the section header"},
    {"node a\n{\n}\n", 1, 1, "The 'node' section header must end with '{' on the same line."},
    {"node a {\n\tnode b {\n\t}\n}\n", 2, 2, "A 'node' section cannot be inside node 'a'"},
    {"node a {\n}\n", 1, 1,
     "The node 'a' section has no 'address' (the IP:PORT it replicates on and its peer "
     "connects "
     "to); add an 'address' line to it."},
    {NODE_A "10.0.0.1:7789\n}\n", 1, 1,
     "Node 'a' is the only node section; replication needs exactly two, so add the peer's"},
    {NODES "node c {\n\taddress 10.0.0.3:7789\n}\n", 7, 1,
     "Too many 'node' sections (more than 2); hak replicates between a pair of nodes."},
    {NODE_A "10.0.0.1:1\n}\nnode a {\n\taddress 10.0.0.2:1\n}\n", 4, 6,
     "Duplicate node name 'a'; the first is at line 1."},
    {NODE_A "10.0.0.1:7789\n}\nnode b {\n\taddress 10.0.0.1:7789\n}\n", 5, 10,
     "Node 'b' has the same address '10.0.0.1:7789' as node 'a' (line 1); each node needs "
     "its "
     "own."},
    {NODE_A "[2001:db8::1]:1\n}\nnode b {\n\taddress [2001:0DB8:0:0::1]:1\n}\n", 5, 10,
     "same address '[2001:0DB8:0:0::1]:1' as node 'a'"},
    {NODE_A "10.0.0.1:1\n\thostname h\n}\nnode b {\n\taddress 10.0.0.2:1\n\thostname h\n}\n", 7, 11,
     "Node 'b' has the same hostname 'h' as node 'a' (line 1), so hakd could not tell"},
    {NODE_A "10.0.0.1:1\n\thostname b\n}\nnode b {\n\taddress 10.0.0.2:1\n}\n", 5, 1,
     "Node 'b' has the same hostname 'b' as node 'a'"},
    {NODE_A "localhost:7789" NODE_B, 2, 10,
     "address 'localhost:7789' of node 'a' has a host name; write the node's IP address, "
     "like "
     "192.0.2.1:7789"},
    {NODE_A "0.0.0.0:7789" NODE_B, 2, 10, "of node 'a' is the wildcard address; the peer"},
    {NODE_A "[::]:7789" NODE_B, 2, 10, "is the wildcard address"},
    {NODE_A "10.0.0.1" NODE_B, 2, 10,
     "address '10.0.0.1' is not HOST:PORT (no ':PORT'); write it like 192.0.2.1:7789 or "
     "[2001:db8::1]:7789."},
    {NODE_A "::1:7789" NODE_B, 2, 10, "an IPv6 address must be in brackets"},
    {NODE_A "[::1:7789" NODE_B, 2, 10, "no ']' after the IPv6 address"},
    {NODE_A "10.0.0.1:0" NODE_B, 2, 10,
     "address port '0' is not valid; use a number from 1 to 65535."},
    {NODE_A "10.0.0.1:65536" NODE_B, 2, 10, "address port '65536' is not valid"},
    {NODE_A "10.0.0.1:1 x" NODE_B, 2, 21, "Key 'address' takes one value but has 2"},
    {"node a {\n\taddress\n}\n", 2, 2,
     "Key 'address' in node 'a' needs a value: IP:PORT, like 192.0.2.1:7789 or "
     "[2001:db8::1]:7789."},
    {"node a {\n\thostname a/b\n}\n", 2, 11,
     "Bad hostname 'a/b' for node 'a'; use 1 to 64 letters, digits, '-', '_' or '.', as "
     "the "
     "'hostname' command prints it."},
    {"node a {\n\thostname -h\n}\n", 2, 11, "Bad hostname '-h'"},
    {"node a {\n\thostname .h\n}\n", 2, 11, "Bad hostname '.h'"},
    {"node a {\n\thostname \"\"\n}\n", 2, 11, "Bad hostname ''"},
    {"node a {\n\thostname "
     "hhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhh\n}\n",
     2, 11, "Bad hostname"},
    {"node a {\n\thostname\n}\n", 2, 2, "needs a value: the machine's hostname"},
    {"node a {\n\tadress 10.0.0.1:1\n}\n", 2, 2,
     "Unknown key 'adress' in node 'a'; did you mean 'address'?"},
    {"node a {\n\tzzzzzzzz 1\n}\n", 2, 2, "valid keys are: address, hostname, heartbeat-address."},
    {"node a {\n\tbacking /x\n}\n", 2, 2, "'backing' belongs in a 'volume' section, not in node"},
    {"node a {\n\tnode b\n}\n", 2, 2, "Key 'node' belongs in a 'global' section, not in node 'a'."},
    {VOL "\taddress 10.0.0.1:1\n}\n", 4, 2, "'address' belongs in a 'node' section"},
    {"global {\n\thostname x\n}\n", 2, 2, "'hostname' belongs in a 'node' section, not in global"},
    /* global node and state-dir */
    {"global {\n\tnode x/y\n}\n", 2, 7,
     "Bad node name 'x/y' for node; use 1 to 64 letters, digits, '_', '.' or '-'"},
    {"global {\n\tnode\n}\n", 2, 2, "needs a value: the name of a node section"},
    {"global {\n\tnode gamma\n}\n", 2, 7,
     "The global 'node gamma' names a node, but there are no node sections; remove it"},
    {NODES "global {\n\tnode gamma\n}\n", 8, 7,
     "The global 'node gamma' names no node section; the nodes are 'a' and 'b'."},
    {"global {\n\tstate-dir var/lib\n}\n", 2, 12,
     "state-dir 'var/lib' must be an absolute path (starting with '/')."},
    /* replication keys of a volume */
    {VOL "\tmode fast\n}\n", 4, 7, "Bad mode 'fast'; choose one of sync, memsync, async."},
    {VOL "\tmode SYNC\n}\n", 4, 7, "Bad mode 'SYNC'"},
    {VOL "\tverify-alg md5\n}\n", 4, 13, "Bad verify-alg 'md5'; choose one of crc32c, sha256."},
    {VOL "\tcsums maybe\n}\n", 4, 8, "Bad csums 'maybe'; choose one of no, yes, after-crash."},
    {VOL "\tmode\n}\n", 4, 2, "needs a value: one of sync, memsync, async."},
    {VOL "\tmeta-disk Internal\n}\n", 4, 12,
     "meta-disk 'Internal' must be 'internal' or an absolute path (starting with '/')."},
    {VOL "\tmeta-disk\n}\n", 4, 2, "needs a value: 'internal' or an absolute path."},
    {VOL "\tmeta-disk /b\n}\n", 4, 12,
     "The metadata file of volume 'v' is its backing '/b'; write 'meta-disk internal'"},
    {VOL "}\nvolume w {\n\tbacking /c\n\tnbd-socket /t\n\tmeta-disk /b\n}\n", 8, 12,
     "The metadata file '/b' of volume 'w' is also the backing of volume 'v' (line 1); "
     "give "
     "each volume its own meta-disk, or use 'internal'."},
    {VOL "\tmeta-disk /m\n}\nvolume w {\n\tbacking /c\n\tnbd-socket /t\n\tmeta-disk /m\n}\n", 9, 12,
     "The metadata file '/m' of volume 'w' is also the metadata file of volume 'v'"},
    {VOL "}\nvolume w {\n\tbacking /c\n\tnbd-socket /t\n\tmeta-disk /var/lib/hak/v.meta\n}\n", 8,
     12, "'/var/lib/hak/v.meta' of volume 'w' is also the metadata file of volume 'v'"},
    {VOL "}\nvolume w {\n\tbacking /var/lib/hak/v.meta\n\tnbd-socket /t\n}\n", 1, 1,
     "The metadata file '/var/lib/hak/v.meta' of volume 'v' is also the backing of volume "
     "'w' "
     "(line 5)"},
    {VOL "}\nglobal {\n\tstate-dir /st/\n}\nvolume w {\n\tbacking /st/v.meta\n\tnbd-socket "
         "/t\n}\n",
     1, 1, "The metadata file '/st/v.meta' of volume 'v' is also the backing of volume 'w'"},
    {VOL "\tbitmap-block-size 2K\n}\n", 4, 20,
     "bitmap-block-size 2K is out of range; use 4K to 1M."},
    {VOL "\tbitmap-block-size 2M\n}\n", 4, 20, "out of range; use 4K to 1M."},
    {VOL "\tbitmap-block-size 12K\n}\n", 4, 20, "bitmap-block-size 12K is not a power of two"},
    {VOL "\tbitmap-block-size\n}\n", 4, 2, "needs a value: a size from 4K to 1M."},
    {VOL "\treplication-port-offset 65535\n}\n", 4, 26,
     "replication-port-offset 65535 is out of range; use 0 to 65534."},
    {VOL "\treplication-port-offset -1\n}\n", 4, 26, "Bad number '-1' for replication-port-offset"},
    {VOL "\tasync-buffer 512K\n}\n", 4, 15, "async-buffer 512K is out of range; use 1M to 4G."},
    {VOL "\tasync-buffer 4097M\n}\n", 4, 15, "out of range; use 1M to 4G."},
    {VOL "\tmax-epoch-size 0\n}\n", 4, 17, "max-epoch-size 0 is out of range; use 1 to 20000."},
    {VOL "\tmax-epoch-size 20001\n}\n", 4, 17, "use 1 to 20000."},
    {VOL "\tafter-split-brain discard-all\n}\n", 4, 20,
     "disconnect, discard-zero-changes, discard-least-changes, discard-younger-primary, "
     "discard-node"},
    {VOL "\tafter-split-brain discard-node\n}\n", 4, 20,
     "has 'after-split-brain discard-node' but no 'discard-node NAME'"},
    {VOL "\tdiscard-node beta\n}\n", 4, 15,
     "has 'discard-node beta' but after-split-brain is disconnect"},
    {VOL "\tdiscard-node a/b\n}\n", 4, 15, "Bad node name 'a/b' for discard-node"},
    {VOL "\tsplit-brain-hook hook.sh\n}\n", 4, 19, "split-brain-hook"},
    {VOL "\tdata-integrity md5\n}\n", 4, 17, "none, crc32c"},
    /* durations */
    {VOL "\tping-interval 5\n}\n", 4, 16,
     "Bad duration '5' for ping-interval; write a number and a unit, ms or s, like 200ms "
     "or "
     "1.5s (to the microsecond at most)."},
    {VOL "\tping-interval 1.5\n}\n", 4, 16, "Bad duration '1.5'"},
    {VOL "\tping-interval 1m\n}\n", 4, 16, "Bad duration '1m'"},
    {VOL "\tping-interval .5s\n}\n", 4, 16, "Bad duration '.5s'"},
    {VOL "\tping-interval 1.s\n}\n", 4, 16, "Bad duration '1.s'"},
    {VOL "\tping-interval 1e3ms\n}\n", 4, 16, "Bad duration '1e3ms'"},
    {VOL "\tping-interval -1s\n}\n", 4, 16, "Bad duration '-1s'"},
    {VOL "\tping-interval 1.0000001s\n}\n", 4, 16, "Bad duration '1.0000001s'"},
    {VOL "\tping-interval 0.0001ms\n}\n", 4, 16, "Bad duration '0.0001ms'"},
    {VOL "\tping-interval 1sec\n}\n", 4, 16, "Bad duration '1sec'"},
    {VOL "\tping-interval 99999999999999999999s\n}\n", 4, 16, "Bad duration"},
    {VOL "\tping-interval 49ms\n}\n", 4, 16,
     "ping-interval 49ms is out of range; use 50ms to 60s."},
    {VOL "\tping-interval 60.000001s\n}\n", 4, 16, "out of range; use 50ms to 60s."},
    {VOL "\tconnect-interval 0s\n}\n", 4, 19, "connect-interval 0s is out of range"},
    {VOL "\tping-timeout 61s\n}\n", 4, 15, "ping-timeout 61s is out of range"},
    {VOL "\tping-interval\n}\n", 4, 2, "needs a value: a duration from 50ms to 60s, like 200ms"},
    {VOL "\tping-interval 2s\n}\n", 4, 16,
     "ping-timeout 2s of volume 'v' must be longer than its ping-interval 2s, or a healthy "
     "peer would be dropped between two pings."},
    {VOL "\tping-timeout 500ms\n\tping-interval 0.5s\n}\n", 4, 15,
     "ping-timeout 500ms of volume 'v' must be longer than its ping-interval 500ms"},
    {VOL "\tping-timeout 1.25s\n\tping-interval 1.5s\n}\n", 4, 15,
     "ping-timeout 1.25s of volume 'v' must be longer than its ping-interval 1.5s"},
    /* service groups (lines 1-3 are VOL, "}" on 4) */
    {VOL "}\ngroup g {\n\tvolume v\n}\n", 5, 1,
     "Group 'g' has no resource; add at least one 'resource NAME {' section inside it."},
    {VOL "}\ngroup g {\n\tvolume x\n\tresource r {\n\t\ttype exec\n\t\tstart a\n\t\tstop "
         "b\n\t\tmonitor c\n\t}\n}\n",
     6, 9, "Group 'g' follows volume 'x', but no 'volume x {' section exists."},
    /* groups of several volumes (lines 1-8 are VOL and VOLW, the group opens on 9) */
    {VOL "}\n" VOLW "group g {\n\tvolume v w v\n" RES_SD "}\n", 10, 13,
     "Group 'g' lists volume 'v' twice; name each volume once."},
    {VOL "}\n" VOLW "group g {\n\tvolume v x\n" RES_SD "}\n", 10, 11,
     "Group 'g' follows volume 'x', but no 'volume x {' section exists."},
    {VOL "}\n" VOLW "group g {\n\tvolume v w\n" RES_SD
         "}\ngroup h {\n\tvolume w\n\tresource s {\n\t\ttype systemd\n\t\tunit "
         "u\n\t}\n}\n",
     17, 9, "Groups 'g' and 'h' both hold volume 'w'; a volume belongs to one group."},
    {VOL "}\n" VOLW "group g {\n\tvolume a b c d e f g h i j k l m n o p q\n" RES_SD "}\n", 10, 41,
     "Too many values for 'volume' (more than 16)."},
    {VOL "}\n" VOLW "group g {\n" RES_SD "}\n", 9, 1,
     "The group 'g' section has no 'volume' (the volumes whose primary runs the group"},
    {VOL "}\n" VOLW "group g {\n\tvolume v w\n\tresource r {\n\t\ttype attach\n\t\tvolume "
         "x\n\t\tdirectory /d\n\t\tlink /l\n\t}\n}\n",
     13, 10,
     "Resource 'r' attaches volume 'x', which group 'g' does not hold; name one of its "
     "volumes: v, w."},
    {VOL "}\n" VOLW "group g {\n\tvolume v w\n\tresource r {\n\t\ttype systemd\n\t\tunit "
         "u\n\t\tvolume v\n\t}\n}\n",
     14, 3,
     "Key 'volume' does not apply to resource 'r' of type systemd; only an attach resource "
     "names a volume"},
    {VOL "}\n" VOLW "group g {\n\tvolume v w\n\tresource r1 {\n\t\ttype attach\n\t\tdirectory "
         "/d1\n\t\tlink /l1\n\t}\n\tresource r2 {\n\t\ttype attach\n\t\tvolume "
         "v\n\t\tdirectory /d2\n\t\tlink /l2\n\t}\n}\n",
     18, 10,
     "Resources 'r1' and 'r2' of group 'g' both attach volume 'v'; attach each volume once."},
    {VOL "}\n" VOLW "group g {\n\tvolume v w\n\tresource r1 {\n\t\ttype attach\n\t\tdirectory "
         "/d1\n\t\tlink /l1\n\t}\n\tresource r2 {\n\t\ttype attach\n\t\tdirectory "
         "/d2\n\t\tlink /l2\n\t}\n}\n",
     16, 2, "Resources 'r1' and 'r2' of group 'g' both attach volume 'v'"},
    {VOL "}\ngroup g {\n\tvolume v\n\tresource r {\n\t\ttype mount\n\t\tdevice /d\n\t\tfstype "
         "ext4\n\t}\n}\n",
     7, 2, "Resource 'r' of type mount needs the key 'directory'."},
    {VOL "}\ngroup g {\n\tvolume v\n\tresource r {\n\t\ttype systemd\n\t\tunit u\n\t\tdevice "
         "/d\n\t}\n}\n",
     10, 3, "Key 'device' does not apply to resource 'r' of type systemd."},
    {VOL "}\ngroup g {\n\tvolume v\n\tresource r {\n\t\ttype nfs\n\t}\n}\n", 8, 8,
     "Bad type 'nfs'; choose one of exec, mount, systemd, attach, vip."},
    {VOL "}\ngroup g {\n\tvolume v\n\tresource r {\n\t\ttype vip\n\t\taddress "
         "192.0.2.300/24\n\t\tinterface eth0\n\t}\n}\n",
     9, 3, "Resource 'r': "},
    {VOL "}\ngroup g {\n\tvolume v\n\tresource r {\n\t\ttype vip\n\t\taddress "
         "192.0.2.3/24\n\t\tinterface eth0/1\n\t}\n}\n",
     10, 3, "Resource 'r': 'eth0/1' is not an interface name (1 to 15 characters, no '/')."},
    {VOL "}\ngroup g {\n\tvolume v\n\tresource r {\n\t\ttype vip\n\t\taddress "
         "192.0.2.3/24\n\t}\n}\n",
     7, 2, "Resource 'r' of type vip needs the key 'interface'."},
    {VOL "}\ngroup g {\n\tvolume v\n\tresource r {\n\t\ttype mount\n\t\tdevice /d\n"
         "\t\tdirectory /m\n\t\tfstype ext4\n\t\tpidfile /p\n\t}\n}\n",
     12, 3, "Key 'pidfile' does not apply to resource 'r' of type mount."},
    {VOL "}\nresource r {\n\ttype exec\n}\n", 5, 1, "Unknown section 'resource'"},
    /* ports of a pair */
    {NODES VOL "}\nvolume w {\n\tbacking /c\n\tnbd-socket /t\n}\n", 11, 1,
     "Volume 'w' has the same replication-port-offset 0 as volume 'v' (line 7); with "
     "nodes, "
     "each volume needs its own port, so give each a different offset."},
    {NODES VOL "\treplication-port-offset 3\n}\nvolume w {\n\tbacking /c\n\tnbd-socket "
               "/t\n\treplication-port-offset 3\n}\n",
     15, 26, "same replication-port-offset 3 as volume 'v'"},
    {NODE_A "10.0.0.1:65000" NODE_B VOL "\treplication-port-offset 536\n}\n", 10, 26,
     "replication-port-offset 536 of volume 'v' goes past port 65535 on node 'a' (port "
     "65000); "
     "use at most 535."},
    {NODE_A "127.0.0.1:7789\n}\nnode b {\n\taddress 127.0.0.1:7790\n}\n" VOL
            "}\nvolume w {\n\tbacking /c\n\tnbd-socket /t\n\treplication-port-offset 1\n}\n",
     14, 26,
     "Volume 'w' would listen on port 7790 of node 'a', which volume 'v' uses on node 'b'; "
     "both "
     "nodes have the IP 127.0.0.1, so choose offsets or node ports farther apart."},
    /* lexical */
    {VOL "\tdescription \"abc\n}\n", 4, 14, "Unterminated string"},
    {VOL "\tdescription \"abc\\\"\n}\n", 4, 14, "Unterminated string"},
    {VOL "\tdescription \"abc\\", 4, 14, "Unterminated string"},
    {VOL "\tdescription \"a\\nb\"\n}\n", 4, 16, "Unknown escape '\\n'"},
    {VOL "\tdescription ab\"c\"\n}\n", 4, 16, "in the middle of a value"},
    {VOL "\tdescription \"a\tb\x01\"\n}\n", 4, 18, "Control character 0x01"},
    {"global {\n\tlog-level \x7finfo\n}\n", 2, 12, "Control character 0x7f"},
    /* transport tls */
    {VOL "\ttls-psk-file /k\n}\n", 4, 15, "has tls-psk-file but its transport is tcp"},
    {VOL "\ttransport tls\n}\n", 4, 12, "'transport tls' without tls-ca-file"},
    {VOL "\ttransport tls\n\ttls-ca-file /ca\n\ttls-cert-file /c\n}\n", 5, 14,
     "without tls-key-file"},
    {VOL "\ttransport tls\n\ttls-psk-file /k\n\ttls-ca-file /ca\n}\n", 6, 14, "not both"},
    {VOL "\ttransport tls\n\ttls-psk-file /k\n\ttls-peer-name b\n}\n", 6, 16, "not both"},
    {VOL "\ttransport ssl\n}\n", 4, 12, "tcp, tls"},
    /* only RDMA with TCP as its fallback: nothing falls back to RDMA, and tls has no fallback */
    {VOL "\ttransport tcp,rdma\n}\n", 4, 12, "tls, rdma, rdma,tcp"},
    {VOL "\ttransport rdma,tls\n}\n", 4, 12, "choose one of"},
    {VOL "\ttransport rdma,tcp\n\ttls-psk-file /k\n}\n", 5, 15,
     "has tls-psk-file but its transport is rdma,tcp"},
    {VOL "\tdescription \"a\\\x02\"\n}\n", 4, 17, "Control character 0x02"},
    {VOL, 1, 1, "Unbalanced braces: this 'volume' section is never closed"},
    {VOL "}\n}\n", 5, 1, "Unbalanced braces: '}' without a matching '{'"},
    {"{\n}\n", 1, 1, "'{' without a section name"},
    {VOL "\t{\n}\n", 4, 2, "'{' without a section name"},
};

/*
 * One test for the whole table: a forked Check test costs a leak check at exit under ASan, which
 * is slow; the case number in each message still names the failing entry.
 */
START_TEST(test_bad_inputs)
{
	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		const struct bad_case *bc = &bad_cases[i];
		struct hak_config *cfg = (struct hak_config *)&cfg; /* must be reset to NULL */
		char err[1024], want[64];
		int rc = parse(bc->text, &cfg, err, sizeof(err)), e = errno;

		ck_assert_msg(rc == -1 && e == EINVAL && cfg == NULL,
		              "case %zu: want failure with EINVAL, got rc %d errno %d", i, rc, e);
		snprintf(want, sizeof(want), "t.conf:%u:%u: ", bc->line, bc->col);
		ck_assert_msg(strncmp(err, want, strlen(want)) == 0,
		              "case %zu: want position %s got: %s\n--- input:\n%s", i, want, err,
		              bc->text);
		ck_assert_msg(strstr(err, bc->phrase), "case %zu: want '%s' in: %s", i, bc->phrase,
		              err);
		ck_assert_msg(!strchr(err, '\n'), "case %zu: the message has a newline: %s", i,
		              err);
	}
}
END_TEST

/* Errors found before tokens exist: NUL bytes, long lines, a file too big. */
START_TEST(test_raw_limits)
{
	static const char nul[] = "global {\n\tlog-le\0vel info\n}\n";
	struct hak_config *cfg = NULL;
	char err[512];
	size_t big = (1u << 20) + 1;
	char *text = malloc(big + 8);

	ck_assert_int_eq(config_parse(nul, sizeof(nul) - 1, "n", &cfg, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "n:2:8: NUL byte in the file; hak.conf must be plain text.");

	/* 4096 characters on a line are fine, 4097 are not. */
	ck_assert_ptr_nonnull(text);
	memcpy(text, "global {\n#", 10);
	memset(text + 10, 'x', 4095);
	memcpy(text + 10 + 4095, "\n}\n", 4);
	ck_assert_int_eq(parse(text, &cfg, err, sizeof(err)), 0);
	config_free(cfg);
	memcpy(text + 10 + 4095, "x\n}\n", 5);
	ck_assert_int_eq(parse(text, &cfg, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "t.conf:2:4097: Line 2 is longer than 4096 characters.");

	/* Exactly 1 MiB of comments and newlines is accepted, one byte more is not. */
	memset(text, '\n', big);
	text[0] = '#';
	ck_assert_int_eq(config_parse(text, big - 1, "big", &cfg, err, sizeof(err)), 0);
	config_free(cfg);
	ck_assert_int_eq(config_parse(text, big, "big", &cfg, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "big:1:1: The file is 1048577 bytes, bigger than"));
	free(text);
}
END_TEST

/* The volume limit keeps the pairwise uniqueness checks cheap on hostile input. */
START_TEST(test_too_many_volumes)
{
	const unsigned max = 4096, per = 64;
	char *text = malloc((size_t)(max + 1) * per), *p = text, err[256];
	struct hak_config *cfg = NULL;

	ck_assert_ptr_nonnull(text);
	for (unsigned i = 0; i < max; i++)
		p += sprintf(p, "volume v%u {\nbacking /b%u\nnbd-socket /s%u\n}\n", i, i, i);
	ck_assert_int_eq(parse(text, &cfg, err, sizeof(err)), 0);
	ck_assert_uint_eq(cfg->n_volumes, max);
	ck_assert_str_eq(cfg->volumes[max - 1].backing, "/b4095");
	config_free(cfg);
	sprintf(p, "volume x {\nbacking /x\nnbd-socket /x\n}\n");
	ck_assert_int_eq(parse(text, &cfg, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "t.conf:16385:1: Too many 'volume' sections (more than 4096).");
	free(text);
}
END_TEST

/* The error buffer may be missing or small; the message is cut, never overflowed. */
START_TEST(test_error_buffer)
{
	struct hak_config *cfg = NULL;
	char small[12];

	int rc = parse("bogus\n", &cfg, NULL, 0), e = errno;

	ck_assert_int_eq(rc, -1);
	ck_assert_int_eq(e, EINVAL);
	memset(small, 'Z', sizeof(small));
	ck_assert_int_eq(parse("bogus\n", &cfg, small, sizeof(small)), -1);
	ck_assert_str_eq(small, "t.conf:1:1:");
	ck_assert_int_eq(config_parse(NULL, 0, NULL, &cfg, NULL, 0), 0);
	ck_assert_str_eq(cfg->file, "<config>");
	config_free(cfg);
	config_free(NULL);
}
END_TEST

/* Writes text to a new temporary file; the caller unlinks path. */
static void write_temp(char *path, const char *text)
{
	int fd = mkstemp(path);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

/*
 * config_check_all() hears every error: a bad value does not hide the next key's, a section
 * with a bad header is skipped and the next one still checked, a missing required key is
 * reported with the others; the checks between sections wait until the sections are right
 * (here: the nbd-socket that is the control socket is not reported yet). The daemon's buffer
 * keeps the first, as config_load() always did.
 */
START_TEST(test_check_all)
{
	char path[] = "/tmp/hak-test-config-XXXXXX";
	struct hak_config *cfg = (struct hak_config *)&cfg;
	struct heard h = {0};
	char err[512];

	write_temp(path, "global {\n"                     /* 1 */
	                 "\tcontrol-socket /run/c.sock\n" /* 2 */
	                 "\tio-depth 1\n"                 /* 3: out of range */
	                 "\tmax-clients x\n"              /* 4: not a number */
	                 "}\n"                            /* 5 */
	                 "volume {\n"                     /* 6: no name */
	                 "}\n"                            /* 7 */
	                 "volume w {\n"                   /* 8: no backing */
	                 "\tnbd-socket /run/c.sock\n"     /* 9 */
	                 "}\n");                          /* 10 */
	ck_assert_int_eq(config_check_all(path, hear, &h, &cfg), -1);
	ck_assert_ptr_null(cfg);
	ck_assert_uint_eq(h.n, 4);
	ck_assert_str_eq(h.lines[0] + strlen(path),
	                 ":3:11: io-depth 1 is out of range; use 8 to 4096.");
	ck_assert_str_eq(h.lines[1] + strlen(path),
	                 ":4:14: Bad number 'x' for max-clients; expected digits only.");
	ck_assert_str_eq(h.lines[2] + strlen(path),
	                 ":6:1: A 'volume' section needs a name; write 'volume NAME {'.");
	ck_assert_ptr_nonnull(strstr(h.lines[3], ":8:1: The volume 'w' section has no 'backing'"));
	ck_assert_int_eq(config_load(path, &cfg, err, sizeof(err)), -1);
	ck_assert_str_eq(err, h.lines[0]);
	unlink(path);

	/* the sections are right: now the checks between them speak */
	memset(&h, 0, sizeof(h));
	strcpy(path, "/tmp/hak-test-config-XXXXXX");
	write_temp(path, "global { control-socket /run/c.sock }\n"
	                 "volume w {\n\tbacking /b\n\tnbd-socket /run/c.sock\n}\n");
	ck_assert_int_eq(config_check_all(path, hear, &h, &cfg), -1);
	ck_assert_uint_eq(h.n, 1);
	ck_assert_ptr_nonnull(strstr(h.lines[0], ":4:13: nbd-socket of volume 'w' is the control "
	                                         "socket"));
	unlink(path);

	/* a file that cannot be read is one error, through the same callback */
	memset(&h, 0, sizeof(h));
	ck_assert_int_eq(config_check_all("/nonexistent/hak.conf", hear, &h, &cfg), -1);
	ck_assert_uint_eq(h.n, 1);
	ck_assert_str_eq(h.lines[0], "/nonexistent/hak.conf: cannot read the configuration file: "
	                             "No such file or directory.");

	/* and a right file none, with the configuration */
	memset(&h, 0, sizeof(h));
	strcpy(path, "/tmp/hak-test-config-XXXXXX");
	write_temp(path, VOL "}\n");
	ck_assert_int_eq(config_check_all(path, hear, &h, &cfg), 0);
	ck_assert_uint_eq(h.n, 0);
	ck_assert_uint_eq(cfg->n_volumes, 1);
	config_free(cfg);
	unlink(path);
}
END_TEST

static Suite *config_errors_suite(void)
{
	Suite *s = suite_create("config_errors");
	TCase *tc = tcase_create("errors");

	tcase_add_test(tc, test_bad_inputs);
	tcase_add_test(tc, test_raw_limits);
	tcase_add_test(tc, test_too_many_volumes);
	tcase_add_test(tc, test_error_buffer);
	tcase_add_test(tc, test_check_all);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(config_errors_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
