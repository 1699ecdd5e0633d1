# shellcheck shell=bash
# Acknowledged-write ledger helpers on top of pair.sh (source lib.sh, pair.sh, then this):
#   ledger_records FILE           acknowledged writes the ledger holds so far (the writer syncs
#                                 its file every 100 ms)
#   ledger_storm NODE FILE ID [SECONDS [VOL]]   a hak-ledger writer on NODE's export (of VOL,
#                                 default db) in the background
#                                 (pid in STORM): 8 MiB of its own at ID x 16 MiB (a ledger's
#                                 generations are its own, two must not share blocks), QD 8, a
#                                 flush every 16 writes, 40 s unless said
#   ledger_stop FILE              stop the storm writing FILE (SIGTERM), log its summary
#   ledger_clean FILE PATH        every acknowledged write of FILE is in PATH (0 missing, 0
#                                 corrupt), logged
#   ledger_verify LEDGER SOURCE_ARGS...   hak-ledger verify (--file PATH or --uri URI) exits 0
#                                 with 0 missing and 0 corrupt, logged
#   fence NODE FIELD              a field of NODE's replication.fencing status
LEDGER=$TOOLS/hak-ledger
[[ -x $LEDGER ]] || fail "$LEDGER is not built"

ledger_records() {
	local sz
	sz=$(stat -c %s "$1" 2>/dev/null) || sz=32
	echo $(((sz > 32 ? sz - 32 : 0) / 16))
}

ledger_storm() {
	"$LEDGER" write --uri "$(node_uri "$1" "${5:-db}")" --ledger "$2" --seconds "${4:-40}" --blocks 2048 \
		--region-offset $(($3 * 16 << 20)) --qd 8 --flush-every 16 --writer-id "$3" \
		--seed "$3" >"$2.out" 2>"$2.err" &
	STORM=$!
	track_pid "$STORM"
}

ledger_stop() {
	kill -TERM "$STORM" 2>/dev/null || true
	wait "$STORM" || true
	log "storm $(basename "$1"): $(cat "$1.out")"
}

ledger_clean() {
	local out rc=0
	out=$("$LEDGER" verify --ledger "$1" --file "$2" 2>&1) || rc=$?
	log "$(basename "$1") against $(basename "$2"): $(grep '^verify:' <<<"$out")"
	assert_eq "$rc" 0 "ledger verify of $(basename "$1") ($out)"
	[[ $out =~ \ 0\ missing ]] || fail "missing writes: $out"
}

ledger_verify() {
	local l=$1 out rc=0 line
	shift
	out=$("$LEDGER" verify --ledger "$l" "$@" 2>&1) || rc=$?
	line=$(grep '^verify:' <<<"$out" | tail -n 1) || true
	if ((rc != 0)) || [[ -z $line ]]; then
		fail "ledger verify of $(basename "$l") ($*) exited $rc: $(tail -n 5 <<<"$out")"
	fi
	assert_eq "$(field_before "$line" missing)" 0 "missing blocks of $(basename "$l") ($*)"
	assert_eq "$(field_before "$line" corrupt)" 0 "corrupt blocks of $(basename "$l") ($*)"
	log "verify $(basename "$l") on $*: ${line#verify: }"
}

fence() { hk "$1" status --json | jq -r ".volumes[0].replication.fencing.$2"; }
