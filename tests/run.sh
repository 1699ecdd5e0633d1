#!/usr/bin/env bash
# hak test runner, called by `make check` as:
#   HAK_BUILD=build/asan tests/run.sh [unit|integration|NAME...]
# Runs every $HAK_BUILD/tests/unit/test_* binary, then every tests/integration/t_*.sh. The data
# tests (t_data_*.sh) run once per I/O engine and are named t_data_x[uring] and t_data_x[pool].
# NAME selects single tests: test_foo, t_foo, t_data_foo (both engines) or 't_data_foo[pool]'.
#
# Each test gets a timeout (600 s, or the value of a "# timeout: N" line in the script / unit test
# source), its output goes to build/test-logs/NAME.log, and the last lines of that log are printed
# when it fails. Exit status 77 means SKIP. The last line is "N passed, N failed, N skipped".
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO" || exit 1
export HAK_BUILD=${HAK_BUILD:-build/asan}
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Check's own per-test default (4 s) is too tight for sanitizer builds on a 2-core machine.
export CK_DEFAULT_TIMEOUT=${CK_DEFAULT_TIMEOUT:-60}
LOGDIR=$REPO/build/test-logs
DEFAULT_TIMEOUT=600
ENGINES=(uring pool)
mkdir -p "$LOGDIR"

passed=0
failed=0
skipped=0
failed_names=()

# Tests are "kind|name|path|engine" records.
TESTS=()

add_unit() {
	local f
	for f in "$HAK_BUILD"/tests/unit/test_*; do
		[[ -f $f && -x $f ]] || continue
		TESTS+=("unit|$(basename "$f")|$f|")
	done
}

# Fuzz harnesses replay their seed corpus (tests/fuzz/corpus/NAME) once: make fuzz explores.
add_fuzz() {
	local f
	for f in build/fuzz/fuzz_*; do
		[[ -f $f && -x $f ]] || continue
		TESTS+=("fuzz|$(basename "$f")|$f|")
	done
}

add_integration_script() {
	local f=$1 n e
	n=$(basename "$f" .sh)
	if [[ $n == t_data_* ]]; then
		for e in "${ENGINES[@]}"; do
			TESTS+=("integration|${n}[$e]|$f|$e")
		done
	else
		TESTS+=("integration|$n|$f|")
	fi
}

add_integration() {
	local f
	for f in tests/integration/t_*.sh; do
		[[ -f $f ]] && add_integration_script "$f"
	done
}

# add_named NAME: one test (or both engine variants of a data test); 1 if unknown.
add_named() {
	local arg=$1 base engine="" f
	base=$(basename "$arg")
	base=${base%.sh}
	if [[ $base =~ ^(.*)\[(.*)\]$ ]]; then
		base=${BASH_REMATCH[1]}
		engine=${BASH_REMATCH[2]}
	fi
	if [[ -x $HAK_BUILD/tests/unit/$base ]]; then
		TESTS+=("unit|$base|$HAK_BUILD/tests/unit/$base|")
		return 0
	fi
	f=tests/integration/$base.sh
	[[ -f $f ]] || return 1
	if [[ -n $engine ]]; then
		TESTS+=("integration|${base}[$engine]|$f|$engine")
	else
		add_integration_script "$f"
	fi
}

# test_timeout KIND PATH: the "# timeout: N" (or "// timeout: N") line of the test's source.
test_timeout() {
	local kind=$1 path=$2 src t
	src=$path
	[[ $kind == unit ]] && src=tests/unit/$(basename "$path").c
	[[ $kind == fuzz ]] && src=tests/fuzz/$(basename "$path").c
	t=$(grep -m1 -oE '^(#|//|/\*) *timeout: *[0-9]+' "$src" 2>/dev/null | grep -oE '[0-9]+$')
	echo "${t:-$DEFAULT_TIMEOUT}"
}

run_one() {
	local kind=$1 name=$2 path=$3 engine=$4 logname logf t0 secs rc tmo status
	logname=${name//\[/.}
	logname=${logname//\]/}
	logf=$LOGDIR/$logname.log
	tmo=$(test_timeout "$kind" "$path")
	t0=$(date +%s.%N)
	{
		echo "# $name: $kind test, timeout ${tmo}s, HAK_BUILD=$HAK_BUILD${engine:+, HAK_IO_ENGINE=$engine}"
		echo "# started $(date -Is)"
	} >"$logf"
	if [[ $kind == unit ]]; then
		timeout -k 10 "$tmo" "$path" </dev/null >>"$logf" 2>&1
		rc=$?
	elif [[ $kind == fuzz ]]; then
		timeout -k 10 "$tmo" "$path" -runs=0 "tests/fuzz/corpus/$name" </dev/null >>"$logf" 2>&1
		rc=$?
	else
		HAK_IO_ENGINE=${engine:-${HAK_IO_ENGINE:-auto}} \
			timeout -k 10 "$tmo" bash "$path" </dev/null >>"$logf" 2>&1
		rc=$?
	fi
	secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
	if ((rc == 0)) && grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$logf"; then
		echo "# sanitizer report in the output: counted as a failure" >>"$logf"
		rc=1
	fi
	case $rc in
	0)
		status=PASS
		passed=$((passed + 1))
		;;
	77)
		status=SKIP
		skipped=$((skipped + 1))
		;;
	*)
		status=FAIL
		failed=$((failed + 1))
		failed_names+=("$name")
		;;
	esac
	echo "# finished $(date -Is), exit status $rc, ${secs}s" >>"$logf"
	if [[ $status == SKIP ]]; then
		echo "SKIP $name (${secs}s): $(grep -m1 -oE 'SKIP: .*' "$logf" | cut -c7-)"
	elif [[ $status == FAIL ]]; then
		local why="exit status $rc"
		((rc == 124 || rc == 137)) && why="timed out after ${tmo}s"
		echo "FAIL $name (${secs}s): $why; last lines of ${logf#"$REPO"/}:"
		tail -n 40 "$logf" | sed 's/^/    /'
	else
		echo "PASS $name (${secs}s)"
	fi
}

if (($# == 0)); then
	add_unit
	add_fuzz
	add_integration
else
	for a in "$@"; do
		case $a in
		unit) add_unit ;;
		fuzz) add_fuzz ;;
		integration) add_integration ;;
		*)
			if ! add_named "$a"; then
				echo "FAIL $a (0.0s): no such test (neither $HAK_BUILD/tests/unit/$a nor tests/integration/$a.sh)"
				failed=$((failed + 1))
				failed_names+=("$a")
			fi
			;;
		esac
	done
fi

for rec in "${TESTS[@]}"; do
	IFS='|' read -r kind name path engine <<<"$rec"
	run_one "$kind" "$name" "$path" "$engine"
done

if ((failed > 0)); then
	echo "failed: ${failed_names[*]}"
fi
echo "$passed passed, $failed failed, $skipped skipped"
((failed == 0))
