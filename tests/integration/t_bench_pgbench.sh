#!/usr/bin/env bash
# timeout: 420
# The headline benchmark cannot rot: `SMOKE=1 bench/pgbench.sh` (one client count, 3 s runs, one
# round, pgbench scale 1, every configuration: standalone, async, memsync, sync and QEMU's
# write-blocking mirror) with the hakd of HAK_BUILD. Asserts a RESULT pgbench line with tps > 0
# and a RESULT pgbench_init line for each of the five configurations, and that the Markdown
# table and the SVG chart were written.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
require_hakd
require_cmd ip jq ss taskset runuser nbdfuse fusermount3 losetup mkfs.ext4 pgbench psql \
	qemu-storage-daemon qemu-nbd gnuplot

OUT=$WORK/out
log "SMOKE=1 bench/pgbench.sh with $HAK_BUILD"
t0=$(date +%s)
# The smoke settings only: nothing of a developer's bench environment leaks in.
if ! env -u CONFIGS -u CLIENTS -u T -u ROUNDS -u SCALE -u SIZE -u BUSY_PEER SMOKE=1 OUT_DIR="$OUT" \
	HAK_BUILD="$HAK_BUILD" "$REPO/bench/pgbench.sh" >"$WORK/bench.out" 2>"$WORK/bench.err"; then
	tail -n 40 "$WORK/bench.err"
	fail "bench/pgbench.sh failed"
fi
log "the smoke run took $(($(date +%s) - t0)) s"
cat "$WORK/bench.out"
for c in standalone async memsync sync qemu; do
	line=$(grep -E "^RESULT pgbench clients=16 config=$c tps=" "$WORK/bench.out" || true)
	[[ -n $line ]] || fail "no RESULT pgbench line for $c"
	tps=${line#*tps=}
	tps=${tps%% *}
	awk -v t="$tps" 'BEGIN {exit !(t > 0)}' || fail "$c: tps=$tps is not > 0"
	grep -qE "^RESULT pgbench_init config=$c seconds=[0-9.]+ ratio=" "$WORK/bench.out" ||
		fail "no RESULT pgbench_init line for $c"
done
[[ -s $OUT/pgbench.md ]] || fail "no Markdown table in $OUT"
grep -q '<svg' "$OUT/pgbench.svg" || fail "no SVG chart in $OUT"
log "PASS"
