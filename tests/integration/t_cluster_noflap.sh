#!/usr/bin/env bash
# timeout: 240
# No false failover under load: a pair with the witness at the DEFAULT heartbeat settings
# (200 ms interval, 1 s deadtime) runs 60 s of saturating writes through alpha's NBD socket (4K
# random QD32 and 1M sequential QD8 at once) while online verifies with sha256 keep the CPU busy
# back to back. Heartbeats run on their own thread, so through it all: neither node ever
# declares the other dead, alpha stays the only primary, beta never asks the witness for the
# vote, no rule of the cluster manager changes, and the longest silence seen on any path stays
# under the deadtime. The load really ran: fio's write counts and the finished verifies are
# checked, and the copies are equal afterwards.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
# shellcheck source=tests/integration/cluster.sh
. "$(dirname "$0")/cluster.sh"
require_hakd
require_cmd jq fio python3 sha256sum

LOAD_SECONDS=${LOAD_SECONDS:-60}
CLUSTER_HB_INTERVAL=200ms CLUSTER_DEADTIME=1s PAIR_EXTRA="verify-alg sha256" PAIR_BLANK=1 \
	cluster_setup sync 256M
pair_report_logs
wait_synced 30
wait_for "[[ -f $WORK/alpha.marker && \$(cl alpha rule) == serve ]]" 15 ||
	fail "alpha did not take the primary role with its group: $(hk alpha status)"
hk beta unstandby >/dev/null
wait_for "[[ \$(cl beta standby) == false && \$(cl beta pending) == none ]]" 5 ||
	fail "beta did not leave standby"
rule_beta=$(cl beta rule)
log "pair up: alpha $(cl alpha rule), beta $rule_beta; load for ${LOAD_SECONDS}s"

# One line per 200 ms: TIME NODE peer_alive role rule want_vote max_last_heard_ms.
sampler() {
	python3 - "$WORK" "$LOAD_SECONDS" <<'PY'
import json, os, socket, sys, time
work, secs = sys.argv[1], float(sys.argv[2])
def status(n):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(2)
    s.connect(f"{work}/{n}.ctl")
    s.sendall(b'{"cmd":"status"}\n')
    buf = b""
    while not buf.endswith(b"\n"):
        c = s.recv(65536)
        if not c:
            break
        buf += c
    s.close()
    return json.loads(buf)
end = time.time() + secs + 5
with open(f"{work}/samples", "w") as out:
    while time.time() < end and not os.path.exists(f"{work}/sampler.stop"):
        for n in ("alpha", "beta"):
            try:
                j = status(n)
                c = j["cluster"]
                heard = max(p["last_heard_ms"] for p in c["paths"])
                out.write(f"{time.time():.3f} {n} {int(c['peer']['alive'])} "
                          f"{j['volumes'][0]['role']} {c['rule']} {int(c['witness']['want'])} "
                          f"{heard}\n")
            except Exception as e:
                out.write(f"{time.time():.3f} {n} error {type(e).__name__}\n")
        out.flush()
        time.sleep(0.2)
PY
}

sampler &
SAMPLER=$!
track_pid "$SAMPLER"

fio_job() {
	fio --name="$1" --ioengine=nbd --uri="$(node_uri alpha)" --rw="$2" --bs="$3" \
		--iodepth="$4" --size=200M --time_based --runtime="$LOAD_SECONDS" \
		--output-format=json --output="$WORK/fio-$1.json" >"$WORK/fio-$1.err" 2>&1 &
	track_pid $!
}
fio_job rand randwrite 4k 32
FIO1=$!
fio_job seq write 1M 8
FIO2=$!

t_end=$((SECONDS + LOAD_SECONDS))
verifies=0
while ((SECONDS < t_end && verifies < 100)); do
	out=$(hk alpha verify db 2>&1) || fail "verify on alpha: $out"
	wait_for "[[ \$(repl alpha verify.running) == false ]]" $((LOAD_SECONDS + 60)) ||
		fail "a verify did not finish"
	verifies=$((verifies + 1))
done
wait "$FIO1" || fail "the random-write fio failed: $(tail -5 "$WORK/fio-rand.err")"
wait "$FIO2" || fail "the sequential fio failed: $(tail -5 "$WORK/fio-seq.err")"
touch "$WORK/sampler.stop"
wait "$SAMPLER" || true

w_rand=$(jq '.jobs[0].write.total_ios' "$WORK/fio-rand.json")
w_seq=$(jq '.jobs[0].write.total_ios' "$WORK/fio-seq.json")
log "load done: $w_rand 4K writes, $w_seq 1M writes, $verifies verifies started"
((w_rand > 1000 && w_seq > 20)) || fail "the load did not run: $w_rand 4K and $w_seq 1M writes"
((verifies >= 1)) || fail "no verify ran"

n_samples=$(wc -l <"$WORK/samples")
((n_samples > LOAD_SECONDS * 2)) || fail "only $n_samples samples: $(tail -3 "$WORK/samples")"
errors=$(grep -c ' error ' "$WORK/samples" || true)
((errors * 10 < n_samples)) || fail "$errors of $n_samples status reads failed"
dead=$(awk '$3 == "0"' "$WORK/samples" | head -3)
[[ -z $dead ]] || fail "a node declared its peer dead under load: $dead"
wrong=$(awk '($2 == "alpha" && $3 != "error" && $4 != "primary") ||
	($2 == "beta" && $3 != "error" && $4 != "secondary")' "$WORK/samples" | head -3)
[[ -z $wrong ]] || fail "a role changed under load: $wrong"
wants=$(awk '$3 != "error" && $6 == "1"' "$WORK/samples" | head -3)
[[ -z $wants ]] || fail "a node asked the witness for the vote under load: $wants"
rules=$(awk '$3 != "error" {print $2, $5}' "$WORK/samples" | sort -u | tr '\n' ' ')
assert_eq "$rules" "alpha serve beta $rule_beta " "the rules seen during the load"
max_heard=$(awk '$3 != "error" && $7 > m {m = $7} END {print m + 0}' "$WORK/samples")
log "$n_samples samples; longest silence on a path: ${max_heard} ms (deadtime 1000 ms)"
((max_heard < 1000)) || fail "a path was silent for ${max_heard} ms"
dead=$(grep -hE 'heartbeat-path .*state:dead|peer .*state:dead' "$WORK/alpha.log" "$WORK/beta.log" |
	head -3 || true)
[[ -z $dead ]] || fail "a heartbeat path or the peer was declared dead: $dead"
wait_synced 60
assert_eq "$(sha256sum <"$(backing alpha)")" "$(sha256sum <"$(backing beta)")" "both copies"
log "PASS: no false failover in ${LOAD_SECONDS}s of load + verify; copies equal"
