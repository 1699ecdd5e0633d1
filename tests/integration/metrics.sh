# shellcheck shell=bash
# Metrics helpers for the tests of the Prometheus endpoint (source lib.sh and pair.sh first; set
# PORT to the nodes' metrics-listen port):
#   scrape NODE OUT   GET /metrics from NODE's namespace into OUT, which promtool must accept
#   m FILE SAMPLE     the value of the sample written exactly SAMPLE (name{labels}); fails if none

scrape() {
	local ns=NS_$1 code
	code=$(ip netns exec "${!ns}" curl -sS --max-time 5 -o "$2" -w '%{http_code}' \
		"http://127.0.0.1:$PORT/metrics") || fail "scraping $1 failed (curl: $code)"
	assert_eq "$code" 200 "scrape of $1: HTTP status"
	promtool check metrics <"$2" >"$2.promtool" 2>&1 ||
		fail "promtool refuses $1's metrics: $(cat "$2.promtool")"
}

m() {
	awk -v s="$2" '$1 == s { print $2; found = 1 } END { exit !found }' "$1" ||
		fail "$1 has no sample $2: $(grep -F "${2%%\{*}" "$1" | head -n 5)"
}
