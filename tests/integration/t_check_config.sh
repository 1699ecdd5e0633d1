#!/usr/bin/env bash
# timeout: 60
# hakctl check-config FILE (issue 27, item 5): every error of a configuration, without a daemon,
# as FILE:LINE:COL: sentence, exit 0 or 1.
#   syntax: three bad lines (an unknown escape, a quote in a word, an unterminated string) and a
#     good section after them: three errors, nothing about the good one;
#   sections: a typo in a key, a bad duration, a bad size, a relative path and a missing key;
#   whole file: checks between sections (control socket reused, fencing without fence-hook,
#     too few heartbeat paths on each node, quorum no without fence-hook, deadtime too short,
#     two volumes on one port);
#   hakd refuses the same files and names the first error, as before;
#   the shipped etc/hak.conf passes; an unreadable file is one error.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
[[ -x $HAKCTL ]] || fail "$HAKCTL is not built"

# check FILE WANT_RC: runs check-config, sets OUT (stdout) and ERR (stderr)
check() {
	local rc=0
	OUT=$("$HAKCTL" check-config "$1" 2>"$WORK/err") || rc=$?
	ERR=$(cat "$WORK/err")
	assert_eq "$rc" "$2" "exit status of check-config $1 (stdout: $OUT, stderr: $ERR)"
}

F=$WORK/syntax.conf
cat >"$F" <<'CONF'
global {
    control-socket "/run/hak/\q.sock"
}
node alpha { address 192.0.2.1:7789 }
node beta { address 192.0.2.2:7789 }
volume db {
    backing /var/lib/hak/d"b.img
    nbd-socket "/run/hak/db.nbd
    insecure-no-auth yes
}
volume ok {
    backing /var/lib/hak/ok.img
    nbd-socket /run/hak/ok.nbd
    replication-port-offset 1
    insecure-no-auth yes
}
CONF
check "$F" 1
want="$F:2:30: Unknown escape '\\q' in a string; only \\\" and \\\\ are allowed.
$F:7:27: A '\"' in the middle of a value; put the whole value in double quotes instead.
$F:8:16: Unterminated string; close it with '\"' on the same line."
assert_eq "$OUT" "$want" "check-config's errors of $F"
assert_eq "$ERR" "hakctl check-config: $F has 3 errors." "check-config's summary"

F=$WORK/sections.conf
cat >"$F" <<'CONF'
global {
    control-socket /run/hak/hakd.sock
    log-levle info
}
node alpha {
    address 192.0.2.1:7789
}
node beta {
    address 192.0.2.2:7789
}
volume db {
    backing /var/lib/hak/db.img
    nbd-socket /run/hak/db.nbd
    ping-interval 5
    max-payload 3X
    auth-key-file /etc/hak/repl.key
}
volume logs {
    nbd-socket relative/path.nbd
    auth-key-file /etc/hak/repl.key
}
CONF
check "$F" 1
want="$F:3:5: Unknown key 'log-levle' in global; did you mean 'log-level'?
$F:14:19: Bad duration '5' for ping-interval; write a number and a unit, ms or s, like 200ms or 1.5s (to the microsecond at most).
$F:15:17: Bad size '3X' for max-payload; expected a size like 4096, 64K or 32M.
$F:19:16: nbd-socket 'relative/path.nbd' must be an absolute path (starting with '/').
$F:18:1: The volume 'logs' section has no 'backing' (the file or block device to serve); add a 'backing' line to it."
assert_eq "$OUT" "$want" "check-config's errors of $F"
assert_eq "$ERR" "hakctl check-config: $F has 5 errors." "check-config's summary"
# hakd keeps refusing to start on the first one
rc=0
out=$(timeout 20 "$HAKD" --config "$F" --foreground 2>&1) || rc=$?
assert_eq "$rc" 1 "hakd's exit status with $F"
assert_eq "$out" "hakd: $F:3:5: Unknown key 'log-levle' in global; did you mean 'log-level'?" \
	"hakd's message for $F"

F=$WORK/whole.conf
cat >"$F" <<'CONF'
global {
    control-socket /run/hak/hakd.sock
}
node alpha {
    address 192.0.2.1:7789
}
node beta {
    address 192.0.2.2:7789
}
cluster {
    auth-key-file /etc/hak/cluster.key
    heartbeat-interval 200ms
    deadtime 300ms
    quorum no
}
volume db {
    backing /var/lib/hak/db.img
    nbd-socket /run/hak/hakd.sock
}
volume wal {
    backing /var/lib/hak/wal.img
    nbd-socket /run/hak/wal.nbd
    fencing resource-and-stonith
}
CONF
check "$F" 1
hb="heartbeat paths; the cluster needs at least two (for example the replication and the service network), so one failed link does not look like a dead peer: write 'heartbeat-address IP:PORT IP:PORT'."
want="$F:18:16: nbd-socket of volume 'db' is the control socket '/run/hak/hakd.sock'; use another path.
$F:23:13: fencing resource-and-stonith of volume 'wal' needs a fence-hook in the cluster section to power the peer off.
$F:4:1: Node 'alpha' has 0 $hb
$F:7:1: Node 'beta' has 0 $hb
$F:14:12: quorum no needs a fence-hook: without the witness's vote only a successful fence may let a node promote; add fence-hook PATH.
$F:13:14: deadtime 0.3s must be more than twice heartbeat-interval 0.2s, or one late packet would declare the peer dead; raise deadtime.
$F:20:1: Volume 'wal' has the same replication-port-offset 0 as volume 'db' (line 16); with nodes, each volume needs its own port, so give each a different offset."
assert_eq "$OUT" "$want" "check-config's errors of $F"
assert_eq "$ERR" "hakctl check-config: $F has 7 errors." "check-config's summary"
rc=0
out=$(timeout 20 "$HAKD" --config "$F" --foreground 2>&1) || rc=$?
assert_eq "$rc" 1 "hakd's exit status with $F"
assert_eq "$out" "hakd: $(head -n 1 <<<"$want")" "hakd's message for $F"

check "$REPO/etc/hak.conf" 0
assert_eq "$OUT" "$REPO/etc/hak.conf: no errors; 2 node sections, 1 volume, 0 groups, no cluster section." \
	"check-config of the shipped example"
assert_eq "$ERR" "" "check-config's stderr for the shipped example"

check "$WORK/missing.conf" 1
assert_eq "$OUT" "$WORK/missing.conf: cannot read the configuration file: No such file or directory." \
	"check-config of a missing file"

rc=0
"$HAKCTL" check-config >/dev/null 2>&1 || rc=$?
assert_eq "$rc" 1 "check-config without a file"
log "all checks passed"
