# Shared by the replication benchmarks; sourced after they define DIR, HAKCTL, hk, repl and die.

# full_resync_seconds: promotes alpha with --force (fresh metadata on both, connected) and sets
# RS_SECONDS to the seconds from the promotion until beta reports the end of its resync, then checks beta is
# UpToDate. It waits on beta's event stream: polling `hakctl status | jq` every 100 ms took a
# quarter of both CPUs away from the resync it was timing (perf, during a 1.3 s resync).
full_resync_seconds() {
	local t0 t1 line ev_pid ended=0
	coproc EV { exec timeout 900 "$HAKCTL" --control "$DIR/beta.ctl" events; }
	ev_pid=$EV_PID
	# Outside the timed window: lets the stream subscribe before anything can happen on it.
	sleep 0.3
	t0=$(date +%s.%N)
	hk alpha primary db --force >/dev/null || die "promoting alpha with --force failed"
	while IFS= read -r -t 600 -u "${EV[0]}" line; do
		if [[ $line == resync-end\ * ]]; then
			ended=1
			break
		fi
	done
	t1=$(date +%s.%N)
	kill "$ev_pid" 2>/dev/null || true
	wait "$ev_pid" 2>/dev/null || true
	((ended)) || die "beta reported no resync-end within 600 s of the promotion"
	[[ $(repl beta disk) == UpToDate ]] ||
		die "beta's resync ended but its disk is $(repl beta disk), not UpToDate"
	RS_SECONDS=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')
}
