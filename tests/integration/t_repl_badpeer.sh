#!/usr/bin/env bash
# timeout: 240
# Bad input on the replication port costs nothing else (DESIGN.md invariant 4). With the real
# alpha stopped, tests/tools/hak-evilpeer connects to beta from alpha's namespace and plays one
# scenario at a time, authenticated with the pair's key (an authenticated but broken peer: what
# reaches an unauthenticated one is t_repl_auth's business):
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
# Then, with the real pair connected: six TCP connections to beta's replication port that never
# speak while a storm runs on alpha. Beta keeps four of them (from one address) waiting to
# authenticate and closes the oldest for each newer one (two lines), and the four left after the
# handshake limit (2 s here; four lines), naming each remote address; every holder sees EOF, no extra ESTAB is left, and
# the pair stays Connected with no lost connection and no resync. Then impostors that speak (a
# HELLO with another UUID, one with protocol version 99, a DATA frame before any HELLO) are each
# closed alone, and the pair's link stays up.
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
	--node alpha --volume db --uuid "$uuid" --size "$size" --block-size "$bsize" --gen "$gen"
	--key "$WORK/repl.key")
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

# ---- silent connections while the pair is connected ---------------------------------------
require_cmd ss
# estab_7789: the established TCP connections on beta's replication port (the pair's two).
estab_7789() {
	ip netns exec "$NS_beta" ss -Htn state established '( sport = :7789 )' | wc -l
}
wait_synced 30
est0=$(estab_7789)
rs_a0=$(repl alpha resyncs_completed)
rs_b0=$(repl beta resyncs_completed)
mark_a=$(wc -l <"$WORK/alpha.log")
mark=$(wc -l <"$WORK/beta.log")
hk alpha primary db >/dev/null || fail "promoting alpha for the silent connections failed"
"$LEDGER" write --uri "$(node_uri alpha)" --ledger "$L" --seconds 5 --blocks 4096 \
	>"$WORK/silent-storm.out" 2>&1 &
storm=$!
track_pid "$storm"
holders=()
for i in 1 2 3 4 5 6; do
	# Connect, say nothing, and report how the connection ended (bounded at 15 s).
	# shellcheck disable=SC2016 # expanded by the inner bash
	ip netns exec "$NS_alpha" bash -c 'exec 3<>/dev/tcp/192.0.2.2/7789 || exit 3
		t0=$(date +%s%N); rc=0; timeout 15 cat <&3 >/dev/null || rc=$?
		echo "rc=$rc after $((($(date +%s%N) - t0) / 1000000)) ms"' >"$WORK/silent.$i.out" 2>&1 &
	holders+=($!)
	track_pid "$!"
done
# The pair must stay Connected the whole time: sample both sides until the holders are done.
t0=$(date +%s.%N)
down=""
for ((i = 0; i < 100; i++)); do
	for n in alpha beta; do
		l=$(repl "$n" link)
		[[ $l == Connected ]] || down+=" $n:$l@$(elapsed_since "$t0")s"
	done
	busy=0
	for p in "${holders[@]}"; do
		pid_alive "$p" && busy=1
	done
	((busy)) || break
	sleep 0.1
done
secs=$(elapsed_since "$t0")
((busy == 0)) || fail "silent: connections still open after ${secs}s: $(estab_7789) ESTAB on beta"
for i in 1 2 3 4 5 6; do
	out=$(cat "$WORK/silent.$i.out")
	log "silent connection $i: $out"
	[[ $out == rc=0\ * ]] || problems+=("silent connection $i did not see EOF: $out")
done
rc=0
wait "$storm" || rc=$?
sed 's/^/    /' "$WORK/silent-storm.out"
((rc == 0)) || fail "the storm during the silent connections exited with $rc"
grep -q ' 0 failed.*stopped: time limit' "$WORK/silent-storm.out" ||
	problems+=("silent: the storm had failures: $(cat "$WORK/silent-storm.out")")
[[ -z $down ]] || problems+=("silent: the pair left Connected:$down")
new_b=$(tail -n +$((mark + 1)) "$WORK/beta.log")
new_a=$(tail -n +$((mark_a + 1)) "$WORK/alpha.log")
n_to=$(grep -cE 'connection from 192\.0\.2\.1:[0-9]+ failed to authenticate: it did not complete the exchange within 2\.0 s' <<<"$new_b" || true)
n_old=$(grep -cE 'connection from 192\.0\.2\.1:[0-9]+ failed to authenticate: it was the oldest of 4 waiting from one address and made room for 192\.0\.2\.1:[0-9]+' <<<"$new_b" || true)
grep -E 'failed to authenticate' <<<"$new_b" | sed 's/^/    beta: /'
((n_to == 4)) || problems+=("silent: $n_to 'did not complete the exchange' lines in beta's log, want 4")
((n_old == 2)) || problems+=("silent: $n_old 'the oldest of 4' lines in beta's log, want 2")
if grep -q 'Lost the connection' <<<"$new_a$new_b"; then
	problems+=("silent: a log says: $(grep -h 'Lost the connection' <<<"$new_a$new_b" | head -n 2)")
fi
assert_eq "$(estab_7789)" "$est0" "silent: ESTAB connections on beta's port 7789 afterwards"
assert_eq "$(repl alpha link)/$(repl beta link)" "Connected/Connected" "silent: the links afterwards"
assert_eq "$(repl alpha resyncs_completed)/$(repl beta resyncs_completed)" "$rs_a0/$rs_b0" \
	"silent: resyncs_completed (alpha/beta)"
hk alpha secondary db >/dev/null || fail "demoting alpha after the silent connections failed"
wait_repl beta peer_role secondary 10
wait_synced 30
log "silent: 6 connections closed within ${secs}s ($n_old evicted, $n_to timed out); pair stayed Connected"

# ---- impostors that speak while the pair is connected -------------------------------------
# A bad HELLO or a frame before any HELLO on a new connection costs that connection only: the
# real peer's link stays up (it used to be dropped with it).
for c in "wrong-uuid|uuid" "wrong-version|version 99" "frame-first|before its HELLO"; do
	name=${c%%|*}
	want=${c#*|}
	mark_a=$(wc -l <"$WORK/alpha.log")
	mark=$(wc -l <"$WORK/beta.log")
	rc=0
	timeout 30 "${EVIL[@]}" --scenario "$name" --timeout 5 >"$WORK/evil.out" 2>&1 || rc=$?
	sed 's/^/    /' "$WORK/evil.out"
	((rc == 0)) || problems+=("connected $name: hak-evilpeer exit status $rc (0 = dropped within 5 s)")
	wait_for "tail -n +$((mark + 1)) '$WORK/beta.log' | grep -iqE '$want'" 3 ||
		problems+=("connected $name: beta's log has no line matching /$want/")
	new=$(tail -n +$((mark + 1)) "$WORK/beta.log")$(tail -n +$((mark_a + 1)) "$WORK/alpha.log")
	if grep -qE 'Lost the connection|Refusing the connection' <<<"$new"; then
		problems+=("connected $name: the pair's link went: $(grep -hE 'Lost the connection|Refusing the connection' <<<"$new" | head -n 2)")
	fi
	assert_eq "$(repl alpha link)/$(repl beta link)" "Connected/Connected" "connected $name: the links"
	log "connected $name: beta says: $(grep -iE "$want" <<<"$new" | head -n 1 | cut -c1-250)"
done

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
