#!/usr/bin/env bash
# timeout: 300
# Failure matrix, disk failure on the primary: PostgreSQL on the cluster behind the VIP
# (pgcluster.sh), a commit-recording client and pgbench running from the client namespace.
# alpha's backing store is a FUSE file served by nbdkit's error filter, which fails every
# request while $WORK/inject exists (real EIO from the kernel, no device-mapper).
#   g. The fault starts under load: alpha detaches its disk (policy detach) and serves through
#      beta, Diskless; no failover: alpha stays primary with PostgreSQL and the VIP, the
#      database answers and keeps committing, nothing committed is lost. Repaired, 'hakctl
#      attach' pulls the volume back under load; the copies end equal (online verify).
# A sampler checks every 100 ms that the two nodes never both serve writes.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
# shellcheck source=tests/integration/cluster.sh
. "$(dirname "$0")/cluster.sh"
# shellcheck source=tests/integration/pgcluster.sh
. "$(dirname "$0")/pgcluster.sh"
require_cmd nbdkit

committed() { wc -l <"$PGC_LEDGER"; }
commits_go_on() {
	local c0
	c0=$(committed)
	wait_for "(( \$(committed) >= $c0 + 20 ))" "$1" ||
		fail "the client committed only $(($(committed) - c0)) rows in $1 s: $(tail -n 3 "$WORK/client.err")"
}

# alpha's faulty store, made before the setup puts the filesystem on it
FDIR=$WORK/fuse-err
mkdir -p "$FDIR"
truncate -s 256M "$WORK/alpha.real"
nbdfuse "$FDIR/disk" --command nbdkit -s --filter=error file "$WORK/alpha.real" \
	error-rate=100% error-file="$WORK/inject" </dev/null >"$WORK/nbdfuse-err.log" 2>&1 &
track_pid $!
defer "fusermount3 -u -z $FDIR 2>/dev/null || true"
wait_for "[[ -f $FDIR/disk ]]" 10 || fail "nbdfuse did not mount $FDIR: $(cat "$WORK/nbdfuse-err.log")"

t_setup=$(date +%s.%N)
PGC_BACKING_alpha=$FDIR/disk pgc_setup 256M
log "setup took $(elapsed_since "$t_setup") s"
sampler_start
pgc_client_start
pgc_pgbench_start
sleep 2

# ---- g. the primary's disk fails ----
t0=$(date +%s.%N)
touch "$WORK/inject"
wait_repl alpha disk Diskless 30
log "g: alpha detached its disk $(elapsed_since "$t0") s after the fault: $(repl alpha detach_reason)"
commits_go_on 30
sleep 3 # a failover, if any, would have started
assert_eq "$(role alpha)" primary "alpha's role with a failed disk"
assert_eq "$(role beta)" secondary "beta's role while alpha is Diskless"
assert_eq "$(pgc_group alpha)" started "alpha's group while Diskless"
assert_eq "$(pgc_group beta)" stopped "beta's group while alpha is Diskless"
assert_eq "$(cl alpha frozen)" false "alpha frozen while Diskless"
assert_eq "$(repl beta peer_disk)" Diskless "beta's view of alpha's disk"
assert_contains "$(cl alpha actions)" degraded "alpha's cluster actions while Diskless"
pgc_vip_on alpha
# The database's reads must reach the volume, which now forwards them to beta: drop the cached
# pages of the database's files and of the FUSE file under the loop device (per file: a global
# drop_caches would wait for every filesystem on this shared machine), then scan a table larger
# than PostgreSQL's own buffers.
rr0=$(repl alpha remote_reads)
nsenter -t "${NODE_PIDS[alpha]}" -m "$PGC_PY" - "$WORK/pg-alpha/data/base" "$WORK/fuse-alpha/disk" <<'PY' ||
import os, sys
paths = [os.path.join(d, f) for d, _, fs in os.walk(sys.argv[1]) for f in fs] + sys.argv[2:]
for p in paths:
    fd = os.open(p, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
PY
	fail "dropping the cached pages on alpha failed"
assert_eq "$(pgc_sql 'SELECT count(*) FROM pgbench_accounts')" 200000 "rows of pgbench_accounts read through the VIP"
rr=$(repl alpha remote_reads)
((rr > rr0)) || fail "alpha forwarded no read to beta ($rr0 -> $rr)"
pgc_assert_rows
log "g: alpha serves Diskless through beta ($rr reads forwarded), no failover"

# ---- repair and attach under load ----
rm -f "$WORK/inject"
out=$(hk alpha attach db 2>&1) || fail "hakctl attach failed: $out"
wait_repl alpha disk UpToDate 120
wait_synced 60
log "g: attach pulled $(repl alpha bytes_resynced) bytes back"
commits_go_on 30
out=$(hk alpha verify db 2>&1) || fail "verify on alpha: $out"
wait_for "[[ \$(repl alpha verify.running) == false ]]" 120 || fail "the verify did not finish"
vst=$(hk alpha status --json | jq -c '.volumes[0].replication.verify')
assert_eq "$(jq -r .differing_blocks <<<"$vst")" 0 "blocks that differ after the attach (online verify)"

sleep 1
pgc_pgbench_stop
pgc_client_stop
assert_eq "$(role alpha)" primary "alpha's role at the end"
pgc_vip_on alpha
pgc_assert_rows
((PGBENCH_TX > 0)) || fail "pgbench did no transaction"
sampler_assert 50
log "PASS"
