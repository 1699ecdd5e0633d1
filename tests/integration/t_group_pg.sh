#!/usr/bin/env bash
# timeout: 240
# A database on a hak volume through a service group, the stack the failover will move:
# attach (nbdfuse + loop device on the volume's NBD socket) -> mount (fsck, ext4) -> PostgreSQL
# (exec). Asserts: the group comes up and PostgreSQL answers on its socket; committed rows
# survive a kill -9 of the postmaster, which the monitor notices and answers with an in-place
# restart of PostgreSQL alone (the mount and the attach stay); a clean stop leaves nothing
# mounted or attached; the filesystem is clean (fsck -fn) and the rows are in the backing file's
# database after a second start.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
require_hakd
require_cmd mkfs.ext4 losetup mountpoint jq nbdfuse fusermount3 runuser psql pg_isready
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[[ -x $PGBIN/pg_ctl ]] || fail "PostgreSQL server binaries are missing (scripts/deps.sh installs them)"

sparse_file "$WORK/vol.img" $((256 * 1024 * 1024))
mkfs.ext4 -q -F "$WORK/vol.img"
FUSE=$WORK/fuse
MNT=$WORK/pg
LINK=$WORK/vol.dev
PGDATA=$MNT/data
PGSOCK=$WORK/pgsock
PGPORT=$((20000 + RANDOM % 20000))
mkdir -p "$PGSOCK"
chown postgres "$PGSOCK"
# Whatever happens, nothing stays mounted, attached or running.
defer "runuser -u postgres -- '$PGBIN/pg_ctl' -D '$PGDATA' stop -m immediate >/dev/null 2>&1 || true"
defer "! mountpoint -q '$MNT' || umount '$MNT' || umount -l '$MNT'"
defer "for d in \$(losetup -j '$FUSE/disk' -n -O NAME 2>/dev/null); do losetup -d \$d; done"
defer "! mountpoint -q '$FUSE' || fusermount3 -u '$FUSE' || fusermount3 -uz '$FUSE'"
defer "[[ ! -s '$FUSE.pid' ]] || kill \$(cat '$FUSE.pid') 2>/dev/null || true"

PGCTL="runuser -u postgres -- $PGBIN/pg_ctl -D $PGDATA -w -t 60"
cat >"$WORK/hak.conf" <<CONF
global {
	control-socket $WORK/ctl
	state-dir $WORK
}
volume db {
	backing $WORK/vol.img
	nbd-socket $WORK/db.nbd
}
group pg {
	volume db
	monitor-interval 500ms
	max-restarts 2
	restart-window 60s
	resource disk {
		type attach
		directory $FUSE
		link $LINK
	}
	resource fs {
		type mount
		device $LINK
		directory $MNT
		fstype ext4
	}
	resource postgres {
		type exec
		start "[ -d $PGDATA ] || { install -d -o postgres $PGDATA && runuser -u postgres -- $PGBIN/initdb -A trust -D $PGDATA >/dev/null; } && $PGCTL -o '-p $PGPORT -k $PGSOCK -c listen_addresses=' -l $PGDATA/server.log start"
		stop "$PGCTL stop -m fast || ! $PGCTL status"
		monitor "pg_isready -q -h $PGSOCK -p $PGPORT"
		timeout 90s
	}
}
CONF

HPID=
start_hakd() {
	"$HAKD" --config "$WORK/hak.conf" --foreground </dev/null >>"$WORK/hakd.log" 2>&1 &
	HPID=$!
	track_pid "$HPID"
	wait_for "[[ -S $WORK/ctl ]]" 10 || fail "hakd did not start: $(tail -n 5 "$WORK/hakd.log")"
}
stop_hakd() {
	kill -TERM "$HPID"
	wait_for "! pid_alive $HPID" 15 || fail "hakd did not exit on SIGTERM"
	wait "$HPID" || fail "hakd exited with status $?"
	rm -f "$WORK/ctl"
}
hk() { timeout 10 "$HAKCTL" --control "$WORK/ctl" "$@"; }
gstate() { hk status --json | jq -r '.groups[0].state'; }
# wait_group STATE SECS: until the group is in STATE, or failed/blocked (then fail at once).
wait_group() {
	wait_for "[[ \$(gstate) =~ ^($1|failed|blocked)\$ ]]" "$2" || true
	[[ $(gstate) == "$1" ]] || fail "the group is not $1: $(hk status)"
}
res_field() { hk status --json | jq -r ".groups[0].resources[] | select(.name == \"$1\") | .$2"; }
sql() { runuser -u postgres -- psql -h "$PGSOCK" -p "$PGPORT" -d postgres -Atq -v ON_ERROR_STOP=1 -c "$1"; }

start_hakd
hk group start pg >/dev/null
wait_group started 120
mountpoint -q "$MNT" || fail "$MNT is not mounted"
[[ -b $(readlink -f "$LINK") ]] || fail "$LINK does not point to a block device"
sql "CREATE TABLE t (id int PRIMARY KEY, v text)"
sql "INSERT INTO t SELECT i, md5(i::text) FROM generate_series(1, 1000) i"
assert_eq "$(sql 'SELECT count(*) FROM t')" 1000 "rows after the insert"

# The postmaster dies: the monitor restarts PostgreSQL in place; the mount stays.
pm=$(head -n 1 "$PGDATA/postmaster.pid")
kill -9 "$pm"
wait_for "[[ \$(res_field postgres restarts) == 1 && \$(gstate) == started ]]" 120 ||
	fail "PostgreSQL was not restarted in place: $(hk status)"
assert_eq "$(res_field fs restarts)" 0 "restarts of the mount"
assert_eq "$(res_field disk restarts)" 0 "restarts of the attach"
assert_eq "$(sql 'SELECT count(*) FROM t')" 1000 "committed rows after kill -9 of the postmaster"

hk group stop pg >/dev/null
wait_group stopped 120
! mountpoint -q "$MNT" || fail "$MNT is still mounted after the stop"
! mountpoint -q "$FUSE" || fail "$FUSE is still a FUSE mount after the stop"
[[ ! -e $LINK ]] || fail "$LINK still exists after the stop"
[[ -z $(losetup -j "$FUSE/disk" -n -O NAME 2>/dev/null) ]] || fail "a loop device is left on $FUSE/disk"
stop_hakd

# The backing file holds a clean filesystem with the database in it.
fsck.ext4 -fn "$WORK/vol.img" >"$WORK/fsck.out" 2>&1 || { cat "$WORK/fsck.out"; fail "fsck found errors"; }
start_hakd
hk group start pg >/dev/null
wait_group started 120
assert_eq "$(sql 'SELECT count(*), sum(id) FROM t')" "1000|500500" "rows after a full stop and start"
hk group stop pg >/dev/null
wait_group stopped 120
stop_hakd
log "PostgreSQL on a hak volume: attach, mount, restart in place, clean stop, data intact"
