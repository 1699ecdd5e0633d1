#!/usr/bin/env bash
# timeout: 240
# Bad input on the replication port costs nothing else (DESIGN.md invariant 4). With the real
# alpha stopped, tests/tools/hak-evilpeer connects to beta from alpha's namespace and plays one
# scenario at a time:
#   on a fresh connection: garbage, a bad frame magic, HELLO with protocol version 99, a header
#   announcing 4 KiB followed by 100 bytes and a close, a DATA header of 2^31 bytes, a HELLO with
#   another volume UUID, a HELLO with another size;
#   after a perfect handshake impersonating alpha (identity and generation IDs read from beta's
#   metadata, so beta decides "no sync"): the same garbage, bad magic, truncation and huge frame,
#   then DATA past the end of the volume, DATA at an unaligned offset, DATA whose range does not
#   match its payload, a frame of unknown type, and all four hostile frames in a row.
# A control case first proves the impersonation is accepted (beta connects and keeps the link).
# For every scenario: beta drops the connection within 5 s, logs a line saying why, is still
# running, its backing file is unchanged, and the real alpha then connects and the pair is in sync.
# At the end a short storm on alpha replicates to beta and both copies are identical.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
require_hakd
require_cmd sha256sum jq

EVILPEER=$TOOLS/hak-evilpeer
LEDGER=$TOOLS/hak-ledger
for t in "$EVILPEER" "$LEDGER"; do
	[[ -x $t ]] || fail "$t is not built (make BUILD=${HAK_BUILD#"$REPO"/} SAN=1 bins)"
done
L=$WORK/badpeer.ledger

PAIR_BLANK=1 pair_setup sync 64M
HAKD_LOGS[alpha]=$WORK/alpha.log
HAKD_LOGS[beta]=$WORK/beta.log
wait_synced 30

# Some data on both copies, so "unchanged" means something.
hk alpha primary db >/dev/null || fail "promoting alpha failed"
"$LEDGER" write --uri "$(node_uri alpha)" --ledger "$L" --seconds 1 --blocks 4096 >/dev/null ||
	fail "the initial storm failed"
hk alpha secondary db >/dev/null || fail "demoting alpha failed"
wait_repl beta peer_role secondary 10
wait_synced 30

# alpha_away: stop the real alpha and wait until beta listens for a new connection.
alpha_away() {
	node_stop alpha
	wait_repl beta link Connecting 10
}

# alpha_back: the real alpha connects again and the pair is in sync.
alpha_back() {
	node_start alpha
	wait_synced 30
}

alpha_away
# Beta's identity and generation IDs, as the hostile peer needs them to pass the handshake.
md=$("$HAKCTL" --config "$WORK/beta.conf" --node beta dump-md db) || fail "dump-md on beta failed"
printf '%s\n' "$md" | sed 's/^/    /'
uuid=$(awk '/^volume uuid/ {print $3}' <<<"$md")
size=$(awk '/^size / {print $2}' <<<"$md")
bsize=$(awk '/^bitmap block size/ {print $4}' <<<"$md")
gen=$(awk '/^gen current/ {c = $3} /^gen bitmap/ {b = $3} /^gen history/ {h = $3 ":" $4}
	END {print c ":" b ":" h}' <<<"$md")
[[ $uuid =~ ^[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$ ]] || fail "no volume UUID in dump-md"
[[ $size =~ ^[0-9]+$ && $bsize =~ ^[0-9]+$ ]] || fail "no size / block size in dump-md"
[[ $gen =~ ^([0-9A-F]{16}:){3}[0-9A-F]{16}$ ]] || fail "no generation IDs in dump-md: $gen"
EVIL=(ip netns exec "$NS_alpha" "$EVILPEER" --connect 192.0.2.2:7789 --bind 192.0.2.1
	--node alpha --volume db --uuid "$uuid" --size "$size" --block-size "$bsize" --gen "$gen")
SHA0=$(sha256sum <"$(backing beta)")

# ---- control: the impersonation is good enough to be accepted --------------------------------
"${EVIL[@]}" --scenario handshake-only --hold 3 >"$WORK/control.out" 2>&1 &
E=$!
track_pid "$E"
wait_repl beta link Connected 5
assert_eq "$(repl beta peer_role)" primary "beta's view of the impersonated alpha"
rc=0
wait "$E" || rc=$?
sed 's/^/    /' "$WORK/control.out"
assert_eq "$rc" 0 "hak-evilpeer handshake-only exit status"
assert_not_contains "$(cat "$WORK/control.out")" "DIFFER" "the control handshake"
wait_repl beta link Connecting 10
assert_eq "$(sha256sum <"$(backing beta)")" "$SHA0" "beta's data after the control case"
log "control: beta accepted the impersonated alpha and kept the link for 3 s"
alpha_back

# ---- hostile scenarios --------------------------------------------------------------------
# name|extra option|what beta's log must say (extended regex, case-insensitive)
CASES=(
	"garbage||magic"
	"bad-magic||magic"
	"wrong-version||version 99"
	"truncated||closed|truncat|incomplete"
	"huge-frame||2147483648"
	"wrong-uuid||uuid"
	"wrong-size||size"
	"garbage|--after-handshake|magic"
	"bad-magic|--after-handshake|magic"
	"truncated|--after-handshake|closed the connection"
	"huge-frame|--after-handshake|2147483648"
	"past-end||outside the volume"
	"unaligned||not aligned"
	"len-mismatch||8192-byte range"
	"unknown-type||unknown frame type 99"
)
problems=()
for c in "${CASES[@]}"; do
	IFS='|' read -r name opt want <<<"$c"
	want=${c#"$name|$opt|"}
	label="$name${opt:+ $opt}"
	alpha_away
	mark=$(wc -l <"$WORK/beta.log")
	rc=0
	t0=$(date +%s.%N)
	# shellcheck disable=SC2086
	timeout 30 "${EVIL[@]}" --scenario "$name" $opt --timeout 5 >"$WORK/evil.out" 2>&1 || rc=$?
	secs=$(elapsed_since "$t0")
	sed 's/^/    /' "$WORK/evil.out"
	node_alive beta || fail "$label: beta died: $(tail -n 20 "$WORK/beta.log")"
	assert_eq "$(sha256sum <"$(backing beta)")" "$SHA0" "$label: beta's backing file"
	if ((rc != 0)); then
		problems+=("$label: hak-evilpeer exit status $rc (0 = dropped within 5 s)")
	fi
	grep -q DIFFER "$WORK/evil.out" && problems+=("$label: the impersonation's generations differ")
	# The refusal is logged when beta drops the stream; give the loop a moment.
	why=""
	wait_for "tail -n +$((mark + 1)) '$WORK/beta.log' | grep -iqE '$want'" 3 &&
		why=$(tail -n +$((mark + 1)) "$WORK/beta.log" | grep -iE "$want" | head -n 1)
	if [[ -n $why ]]; then
		log "$label: dropped in ${secs}s; beta says: ${why:0:300}"
	else
		problems+=("$label: beta's log has no line matching /$want/; it logged:$(
			tail -n +$((mark + 1)) "$WORK/beta.log" | sed 's/^/ | /' | tr -d '\n' | cut -c1-600)")
		log "$label: exit $rc in ${secs}s, but no log line matching /$want/"
	fi
	alpha_back
done

# The four hostile frames of the brief in one run, one connection each.
alpha_away
mark=$(wc -l <"$WORK/beta.log")
rc=0
timeout 60 "${EVIL[@]}" --scenario hostile-offsets --timeout 5 >"$WORK/evil.out" 2>&1 || rc=$?
sed 's/^/    /' "$WORK/evil.out"
node_alive beta || fail "hostile-offsets: beta died"
assert_eq "$(sha256sum <"$(backing beta)")" "$SHA0" "hostile-offsets: beta's backing file"
((rc == 0)) || problems+=("hostile-offsets: hak-evilpeer exit status $rc")
assert_eq "$(grep -c '^result: .*dropped' "$WORK/evil.out")" 4 "hostile-offsets: dropped connections"
for w in "outside the volume" "not aligned" "8192-byte range" "unknown frame type"; do
	tail -n +$((mark + 1)) "$WORK/beta.log" | grep -q "$w" ||
		problems+=("hostile-offsets: no '$w' in beta's log")
done
alpha_back

# ---- bad input cost nothing else: replication still works -----------------------------------
hk alpha primary db >/dev/null || fail "promoting alpha after the scenarios failed"
"$LEDGER" write --uri "$(node_uri alpha)" --ledger "$L" --seconds 1 --blocks 4096 >/dev/null ||
	fail "the final storm failed"
hk alpha secondary db >/dev/null || fail "demoting alpha failed"
wait_repl beta peer_role secondary 10
wait_synced 30
node_stop alpha
node_stop beta
assert_eq "$(sha256sum <"$(backing alpha)")" "$(sha256sum <"$(backing beta)")" \
	"sha256 of alpha's and beta's backing files"
out=$("$LEDGER" verify --ledger "$L" --file "$(backing beta)" 2>&1) ||
	fail "the ledger does not verify on beta's file: $out"
log "final storm replicated: $(grep '^verify:' <<<"$out")"

if ((${#problems[@]})); then
	for p in "${problems[@]}"; do
		log "PROBLEM: $p"
	done
	fail "${#problems[@]} scenario checks failed"
fi
log "all checks passed"
