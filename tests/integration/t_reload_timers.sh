#!/usr/bin/env bash
# timeout: 120
# A reload changes the replication timers live (ping-interval, connect-interval): on a connected
# pair pinging every 200 ms, alpha's file is edited to 50 ms and `hakctl reload` applies it; the
# pings alpha sends per second go up about fourfold (counted in its status), the link stays
# Connected, and a key that needs a restart in the same file is refused with exit 3 while the
# timer change is applied all the same. Back to 200 ms, the rate falls again.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
require_hakd
require_cmd jq

# ping_rate NODE: the pings NODE sends per 10 s, counted over about 2 s (the window is timed
# from the status reads themselves, which are slow under a sanitizer).
ping_rate() {
	local a b t0 t1
	a=$(repl "$1" pings_sent)
	t0=$(date +%s%N)
	sleep 2
	b=$(repl "$1" pings_sent)
	t1=$(date +%s%N)
	echo $(((b - a) * 10000000000 / (t1 - t0)))
}

PAIR_BLANK=1 pair_setup sync 8M
pair_report_logs
wait_synced 30
slow=$(ping_rate alpha)
((slow >= 30 && slow <= 70)) || fail "$slow pings per 10 s at ping-interval 200ms, want about 50"

sed -i 's/ping-interval 200ms/ping-interval 50ms/; s/connect-interval 200ms/connect-interval 100ms/' \
	"$WORK/alpha.conf"
out=$(hk alpha reload 2>&1) || fail "hakctl reload exited $? for two live keys: $out"
assert_contains "$out" "ping-interval" "reload output names the change"
fast=$(ping_rate alpha)
((fast >= 130 && fast <= 260)) || fail "$fast pings per 10 s after the reload to 50ms, want about 200"
assert_eq "$(repl alpha link)" Connected "link after the reload"
assert_contains "$(cat "$WORK/alpha.log")" "Pinging the peer every 0.050 s (was 0.200 s)." \
	"the log line of the new interval"
assert_contains "$(cat "$WORK/alpha.log")" "Trying to connect every 0.100 s (was 0.200 s)." \
	"the log line of the new connect interval"

# Back, together with a key that needs a restart: exit 3, the live key applied regardless.
sed -i 's/ping-interval 50ms/ping-interval 200ms/; s/mode sync/mode async/' "$WORK/alpha.conf"
rc=0
out=$(hk alpha reload 2>&1) || rc=$?
assert_eq "$rc" 3 "reload exit status with a refused key (output: $out)"
assert_contains "$out" "mode" "the refused key is named"
again=$(ping_rate alpha)
((again >= 30 && again <= 70)) || fail "$again pings per 10 s back at 200ms, want about 50"
assert_eq "$(repl alpha mode)" sync "mode after a refused change"
log "PASS: ping-interval $slow -> $fast -> $again pings per 10 s through reloads; mode refused"
