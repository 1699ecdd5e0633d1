#!/usr/bin/env bash
# timeout: 60
# bash completion for hakctl (packaging/completion/hakctl, issue 27 item 5): the file is sourced
# in a plain bash and _hakctl is called with COMP_WORDS/COMP_CWORD as bash sets them; COMPREPLY
# must hold exactly the expected words: commands, options, volume and group names from a running
# hakd (none, silently, when it does not run), volumes and nodes of the configuration file for
# the offline commands, file names for check-config.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
require_hakd
COMPL=$REPO/packaging/completion/hakctl
[[ -f $COMPL ]] || fail "$COMPL is missing"

cat >"$WORK/hak.conf" <<CONF
global {
	control-socket $WORK/ctl
	state-dir $WORK
}
node alpha {
	address 192.0.2.1:7789
}
node beta {
	address 192.0.2.2:7789
}
volume db {
	backing $WORK/db.img
	nbd-socket $WORK/db.nbd
	insecure-no-auth yes
}
volume wal {
	backing $WORK/wal.img
	nbd-socket $WORK/wal.nbd
	replication-port-offset 1
	insecure-no-auth yes
}
CONF
cat >"$WORK/solo.conf" <<CONF
global {
	control-socket $WORK/solo.ctl
	state-dir $WORK
}
volume data {
	backing $WORK/data.img
	nbd-socket $WORK/data.nbd
}
volume logs {
	backing $WORK/logs.img
	nbd-socket $WORK/logs.nbd
}
group web {
	volume data
	resource app {
		type exec
		start "true"
		monitor "true"
		stop "true"
	}
}
CONF
mkdir -p "$WORK/files"
touch "$WORK/files/hak.conf" "$WORK/files/hak.conf.example" "$WORK/files/other"

# complete WORD...: the completions of the last word (the one being typed), sorted, one line
complete_words() {
	bash --norc --noprofile -c '
		. "$1"; shift
		COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
		_hakctl
		printf "%s\n" "${COMPREPLY[@]}" | LC_ALL=C sort | tr "\n" " " | sed "s/ $//"' \
		_ "$COMPL" "$@"
}

# expect WANT WORD...: the completions are exactly WANT
expect() {
	local want=$1 got
	shift
	got=$(complete_words "$@")
	assert_eq "$got" "$want" "completions of '$*'"
}

H=$HAKCTL
SOLO=(--control "$WORK/solo.ctl")
expect "check-config connect create-md" "$H" c
expect "detach disconnect drill dump-md" "$H" d
expect "reload resolve resync" "$H" re
expect "--config --control" "$H" --con
expect "status" "$H" --control "$WORK/x.ctl" stat
expect "--json" "$H" status --
expect "pause resume" "$H" resync db ""
expect "clear start stop" "$H" group ""
expect "crash-primary crash-service" "$H" drill cr
expect "--peer-socket" "$H" drill crash-primary --pe
expect "--timeout" "$H" wait-sync --t
expect "--blank --force db wal" "$H" --config "$WORK/hak.conf" create-md ""
expect "alpha beta" "$H" --config "$WORK/hak.conf" --node ""
expect "$WORK/files/hak.conf $WORK/files/hak.conf.example" "$H" check-config "$WORK/files/hak"
# no hakd answering: no volume names, no error output
expect "--force" "$H" "${SOLO[@]}" primary ""
out=$(complete_words "$H" "${SOLO[@]}" connect "" 2>&1)
assert_eq "$out" "" "completion output without a running hakd"

touch "$WORK/data.img" "$WORK/logs.img"
truncate -s 16M "$WORK/data.img" "$WORK/logs.img"
"$HAKD" --config "$WORK/solo.conf" --foreground </dev/null >"$WORK/hakd.log" 2>&1 &
HPID=$!
track_pid "$HPID"
HAKD_LOGS[solo]=$WORK/hakd.log
wait_for "'$HAKCTL' --control '$WORK/solo.ctl' version" 10 ||
	fail "hakd did not start: $(tail -n 5 "$WORK/hakd.log")"
expect "data logs" "$H" "${SOLO[@]}" connect ""
expect "logs" "$H" "${SOLO[@]}" verify l
expect "--force data logs" "$H" "${SOLO[@]}" primary ""
expect "--timeout data logs" "$H" "${SOLO[@]}" wait-sync ""
expect "web" "$H" "${SOLO[@]}" group start ""
expect "" "$H" "${SOLO[@]}" connect data ""
log "all checks passed"
