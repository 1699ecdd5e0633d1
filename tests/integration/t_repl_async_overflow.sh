#!/usr/bin/env bash
# timeout: 180
# Async mode with a send buffer far smaller than the write stream: the primary must not grow
# without bound (it drops the connection, tracks writes in the bitmap and resyncs after
# reconnecting), and once the writes stop the pair converges to identical copies.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pair.sh"

PAIR_BLANK=1 PAIR_EXTRA="async-buffer 1M" pair_setup async 256M
pair_report_logs
hk alpha primary db >/dev/null
pid=${NODE_PIDS[alpha]}
rss0=$(rss_kb "$pid")
fio --name=w --ioengine=nbd --uri="$(node_uri alpha)" --rw=write --bs=1M --iodepth=8 \
	--size=256M --time_based --runtime=5 --output="$WORK/fio.out" ||
	fail "fio failed: $(tail -5 "$WORK/fio.out")"
rss1=$(rss_kb "$pid")
log "alpha RSS ${rss0} KiB before, ${rss1} KiB after the overload"
assert_le "$((rss1 - rss0))" 131072 "RSS growth of alpha in KiB under an overloaded async link"
overflows=$(grep -c 'async send buffer is full' "$WORK/alpha.log" || true)
((overflows >= 1)) || fail "the 1 MiB async buffer never overflowed: the test did not test anything"
log "async buffer overflowed $overflows times"
wait_synced 60
node_stop alpha
node_stop beta
a=$(sha256sum <"$(backing alpha)")
b=$(sha256sum <"$(backing beta)")
assert_eq "$a" "$b" "sha256 of alpha's and beta's backing files"
log "copies identical after $overflows overflows"
