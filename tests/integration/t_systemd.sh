#!/usr/bin/env bash
# timeout: 300
# hakd under a real systemd: PID 1 here is no systemd, so systemd-nspawn boots one in a container
# of this host's own tree (--volatile=yes: a tmpfs root with the host's /usr; the repository read
# only and the work directory bound at their own paths; loopback only). The shipped units
# (packaging/hakd.service, hak-witness.service) are installed with a drop-in that points
# ExecStart at the binaries under test, and then:
#   - systemctl start returns once hakd sent READY: the NBD socket listens, the cluster manager
#     has joined, ActiveState=active, StatusText has the volume's role and the cluster;
#   - a promotion shows in StatusText (STATUS= follows role changes);
#   - the witness unit starts and goes active, StatusText "witness: listening";
#   - systemctl reload with one live change (log-level) and one refused (max-clients): the first
#     is applied, the second named with both values, the same MainPID runs on; hakctl reload
#     prints the same outcome, and two clients are still served (max-clients 1 refused); a broken
#     file is refused whole with its file:line;
#   - HAK_TEST_STALL_THREAD=heartbeat:3 hangs the heartbeat thread: hakd stops feeding the
#     watchdog, systemd kills it (Watchdog timeout) and restarts it (NRestarts);
#   - systemctl stop: STOPPING, a clean exit (status 0, Result=success).
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
require_hakd
require_cmd systemd-nspawn nsenter qemu-io jq
[[ -x /lib/systemd/systemd ]] || fail "/lib/systemd/systemd is missing; run scripts/deps.sh"

MACHINE=hak-$RUN_ID
T0=$(date +%s.%N)
# -b: boot systemd as the container's PID 1; the arguments after it are systemd's kernel-style
# options: no first-boot questions, and basic.target only: multi-user.target would start every
# service this host has installed and enabled (the presets populate the empty /etc).
systemd-nspawn -q -D / --volatile=yes --machine="$MACHINE" --register=no --keep-unit \
	--private-network --bind-ro="$REPO" --bind="$WORK" -b \
	systemd.firstboot=off systemd.unit=basic.target \
	</dev/null >"$WORK/nspawn.log" 2>&1 &
NSPAWN=$!
track_pid "$NSPAWN"
# kill_own's SIGTERM makes nspawn power the container off; give it time for that.
defer "kill_own $NSPAWN 20"

# The container's PID 1 is nspawn's child once the container is set up (before, a short-lived
# helper is), so it is looked up again until its systemd answers.
LEADER=
inct() { nsenter -t "$LEADER" -m -u -i -n -p -- "$@"; }
sysctl_() { timeout 60 nsenter -t "$LEADER" -m -u -i -n -p -- systemctl "$@"; }
booted() {
	LEADER=$(ps -o pid= --ppid "$NSPAWN" | tr -d ' ' | head -n 1)
	[[ -n $LEADER && $(inct systemctl is-system-running 2>/dev/null) =~ ^(running|degraded)$ ]]
}
wait_for booted 60 ||
	fail "the container's systemd did not finish booting: $(tail -c 3000 "$WORK/nspawn.log")"
log "systemd booted in container $MACHINE (leader pid $LEADER) in $(elapsed_since "$T0") s"
ROOT=/proc/$LEADER/root
show() { sysctl_ show -p "$2" --value "$1"; }
journal() { inct journalctl -q -o cat -u "$1" --no-pager; }
# jhas UNIT [-E] TEXT: the unit's journal has TEXT (read whole first: grep -q would close the
# pipe early and pipefail would call that a failure).
jhas() {
	local j
	j=$(journal "$1")
	shift
	grep -q "${@:1:$#-1}" -- "${!#}" <<<"$j"
}

# ---- a node of a pair with a cluster section (its peer never comes: the volume stays alone) ----
head -c 32 /dev/urandom | base64 >"$WORK/k"
chmod 600 "$WORK/k"
truncate -s 64M "$WORK/a.img"
mkdir -p "$WORK/state"
write_conf() { # LOG_LEVEL MAX_CLIENTS [EXTRA_LINE]
	cat >"$WORK/hak.conf" <<EOF
global {
    control-socket $WORK/a.ctl
    log-level $1
    max-clients $2
    io-engine pool
    state-dir $WORK/state
}
node alpha {
    address 127.0.0.1:7789
    heartbeat-address 127.0.0.1:7790 127.0.0.1:7792
}
node beta {
    address 127.0.0.2:7789
    heartbeat-address 127.0.0.2:7790 127.0.0.2:7792
}
cluster {
    auth-key-file $WORK/k
    heartbeat-interval 100ms
    deadtime 500ms
    witness-address 127.0.0.3:7791
}
volume db {
    backing $WORK/a.img
    nbd-socket $WORK/a.nbd
    meta-disk $WORK/a.meta
    auth-key-file $WORK/k
}
${3:-}
EOF
}
write_conf info 64
"$HAKCTL" --config "$WORK/hak.conf" --node alpha create-md db >"$WORK/create-md.log" 2>&1 ||
	fail "create-md failed: $(cat "$WORK/create-md.log")"

UNITS=$ROOT/etc/systemd/system
mkdir -p "$UNITS/hakd.service.d" "$UNITS/hak-witness.service.d"
cp "$REPO/packaging/hakd.service" "$REPO/packaging/hak-witness.service" "$UNITS/"
# The drop-ins: the binaries under test and this run's config; the units' own settings (Type,
# NotifyAccess, ExecReload, Restart) stay as shipped. A short watchdog keeps the test quick.
cat >"$UNITS/hakd.service.d/test.conf" <<EOF
[Unit]
ConditionPathExists=
[Service]
ExecStart=
ExecStart=$HAKD --config $WORK/hak.conf --node alpha --foreground
WatchdogSec=3s
Environment=ASAN_OPTIONS=$ASAN_OPTIONS UBSAN_OPTIONS=$UBSAN_OPTIONS
EOF
cat >"$UNITS/hak-witness.service.d/test.conf" <<EOF
[Unit]
ConditionPathExists=
[Service]
ExecStart=
ExecStart=$HAKD --witness --config $WORK/hak.conf --foreground
# This run's config, key and state-dir live in /var/tmp, which PrivateTmp= would hide.
PrivateTmp=no
ReadWritePaths=$WORK
Environment=ASAN_OPTIONS=$ASAN_OPTIONS UBSAN_OPTIONS=$UBSAN_OPTIONS
EOF
# The container's network is loopback only: nothing to wait for, and network-online.target (the
# units' After=) would wait for systemd-networkd-wait-online's two-minute timeout.
sysctl_ mask --runtime systemd-networkd-wait-online.service
sysctl_ daemon-reload

# ---- start: active only after READY ----
T1=$(date +%s.%N)
sysctl_ start hakd.service || fail "systemctl start hakd failed: $(journal hakd | tail -n 30)"
log "systemctl start hakd returned after $(elapsed_since "$T1") s"
[[ -S $WORK/a.nbd ]] || fail "systemctl start returned before the NBD socket listened"
assert_eq "$(show hakd ActiveState)/$(show hakd SubState)" active/running "hakd's unit state"
jhas hakd -F 'the cluster manager has joined; told systemd hakd is ready' ||
	fail "hakd's log does not say it sent READY after the cluster manager joined"
PID1=$(show hakd MainPID)
wait_for "[[ \$(show hakd StatusText) == *'cluster: joined'* ]]" 10 ||
	fail "StatusText lacks the cluster: '$(show hakd StatusText)'"
st=$(show hakd StatusText)
log "StatusText: $st"
assert_contains "$st" "db: secondary Inconsistent Connecting" "StatusText"

# STATUS= follows a role change.
timeout 10 "$HAKCTL" --control "$WORK/a.ctl" primary db --force >"$WORK/promote.out" 2>&1 ||
	fail "hakctl primary --force failed: $(cat "$WORK/promote.out")"
wait_for "[[ \$(show hakd StatusText) == *'db: primary'* ]]" 10 ||
	fail "StatusText did not follow the promotion: '$(show hakd StatusText)'"
log "StatusText after the promotion: $(show hakd StatusText)"

# ---- the witness unit ----
sysctl_ start hak-witness.service || fail "systemctl start hak-witness failed: $(journal hak-witness | tail -n 20)"
assert_eq "$(show hak-witness ActiveState)" active "the witness unit's state"
assert_eq "$(show hak-witness StatusText)" "witness: listening" "the witness's StatusText"

# ---- reload: one live change, one refused ----
write_conf debug 1
sysctl_ reload hakd.service || fail "systemctl reload hakd failed: $(journal hakd | tail -n 20)"
wait_for "jhas hakd -F 'Reloaded $WORK/hak.conf: 1 change(s) applied, 1 refused.'" 10 ||
	fail "hakd's log lacks the reload's outcome: $(journal hakd | tail -n 20)"
jhas hakd -F 'Reload: global: log-level is now debug (was info).' ||
	fail "the live change (log-level) is not logged as applied"
jhas hakd -F 'Reload: global: max-clients cannot change while hakd runs (running: 64, file: 1); it keeps its running value until hakd is restarted.' ||
	fail "the refused change (max-clients) is not logged with both values"
# debug is in effect: the reload's own STATUS bookkeeping is not, but the peer's connect
# attempts are logged at debug only.
wait_for "jhas hakd -E 'debug: \\[db\\].*Connecting to beta'" 10 ||
	fail "log-level debug did not take effect"
assert_eq "$(show hakd MainPID)" "$PID1" "hakd's pid after the reload"
assert_eq "$(show hakd ActiveState)" active "hakd's unit state after the reload"
wait_for "[[ \$(show hakd StatusText) == *'reload: 1 applied, 1 refused (global: max-clients needs a restart)'* ]]" 10 ||
	fail "StatusText lacks the reload's outcome: '$(show hakd StatusText)'"
out=$(timeout 10 "$HAKCTL" --control "$WORK/a.ctl" reload 2>&1) && rc=0 || rc=$?
assert_eq "$rc" 3 "hakctl reload's exit status with a refused change"
assert_contains "$out" "refused: global: max-clients 64 -> 1" "hakctl reload"
assert_contains "$out" "change(s) applied, 1 refused (they need a restart of hakd)" "hakctl reload"
# A broken file: refused whole with its position, the daemon runs on.
# The refused max-clients 1 is not in force: two clients are served at once.
QIO=()
for i in 1 2; do
	qemu-io -f raw -r -c 'sleep 60000' "$(nbd_uri "$WORK/a.nbd" db)" >"$WORK/qio$i.out" 2>&1 &
	QIO+=($!)
	track_pid $!
done
clients() { timeout 10 "$HAKCTL" --control "$WORK/a.ctl" --json status | jq '.volumes[0].clients'; }
wait_for "[[ \$(clients) == 2 ]]" 10 ||
	fail "two clients are not both served after the refused max-clients 1: $(clients) connected"
kill_own "${QIO[0]}"
kill_own "${QIO[1]}"
write_conf debug 1 "garbage"
sysctl_ reload hakd.service || true
wait_for "jhas hakd -E \"Reload refused, the running configuration stays: $WORK/hak.conf:[0-9]+:1: 'garbage' is outside any section\"" 10 ||
	fail "a broken file is not refused with its file:line: $(journal hakd | tail -n 5)"
assert_eq "$(show hakd ActiveState)/$(show hakd MainPID)" "active/$PID1" "hakd after a refused reload"
write_conf debug 64

# ---- the watchdog: a stuck heartbeat thread gets hakd restarted ----
cat >"$UNITS/hakd.service.d/stall.conf" <<EOF
[Service]
Environment=HAK_TEST_STALL_THREAD=heartbeat:3
EOF
sysctl_ daemon-reload
sysctl_ restart hakd.service || fail "systemctl restart hakd failed"
PID2=$(show hakd MainPID)
T2=$(date +%s.%N)
wait_for "[[ \$(show hakd NRestarts) -ge 1 ]]" 40 ||
	fail "systemd did not restart hakd after its heartbeat thread stalled: $(journal hakd | tail -n 20)"
log "systemd restarted hakd $(elapsed_since "$T2") s after the restart that armed the stall"
jhas hakd -F 'hakd.service: Watchdog timeout' ||
	fail "systemd's journal does not name the watchdog as the reason"
jhas hakd -F "Thread heartbeat (and 0 more) made no progress" ||
	fail "hakd did not log which thread stopped the watchdog feeding"
[[ $(show hakd MainPID) != "$PID2" ]] || fail "hakd still runs as pid $PID2"
rm "$UNITS/hakd.service.d/stall.conf"
sysctl_ daemon-reload
sysctl_ restart hakd.service || fail "systemctl restart hakd (without the stall) failed"
assert_eq "$(show hakd ActiveState)" active "hakd's unit state after the watchdog episode"

# ---- stop: STOPPING, clean exit ----
sysctl_ stop hakd.service
assert_eq "$(show hakd ActiveState)" inactive "hakd's unit state after stop"
assert_eq "$(show hakd Result)" success "hakd's Result after stop"
assert_eq "$(show hakd ExecMainStatus)" 0 "hakd's exit status after stop"
journal hakd >"$WORK/hakd.journal"
tail -n 5 "$WORK/hakd.journal" | grep -q 'hakd stopped cleanly' ||
	fail "hakd's last lines do not say it stopped cleanly: $(journal hakd | tail -n 5)"
sysctl_ stop hak-witness.service
assert_eq "$(show hak-witness Result)" success "the witness's Result after stop"

journal hakd >"$WORK/hakd.journal"
journal hak-witness >"$WORK/witness.journal"
sanitizer_check "$WORK/hakd.journal" || fail "sanitizer report in hakd's journal"
sanitizer_check "$WORK/witness.journal" || fail "sanitizer report in the witness's journal"
log "PASS: Type=notify, STATUS, reload, watchdog and stop under systemd, in $(elapsed_since "$T0") s"
