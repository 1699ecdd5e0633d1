#!/usr/bin/env bash
# The one-way doors between the source folders, checked over the #include lines (make check).
#
# Every folder of daemon/ (io, meta, repl, ...) and lib/ is a node; a quoted include of a header
# in another folder is an edge. Fails when:
#   - the folder graph has a cycle (two folders that include each other, directly or around),
#   - lib/ includes anything of daemon/ (lib is what daemon, cli, shim and tests share),
#   - a folder's private header (NAME_int.h) is included from outside its folder.
# Prints every folder's outgoing doors with -v.
set -euo pipefail
cd "$(dirname "$0")/.."

verbose=0
[[ ${1:-} == -v ]] && verbose=1

folder_of() { # path of a source file -> its node name
	local d=${1%/*}
	case $d in
	daemon) echo main ;;
	daemon/*) echo "${d#daemon/}" ;;
	*) echo "$d" ;;
	esac
}

# The folder a quoted include names, from the includer's folder: "lib/x.h", "repl/x.h" (under
# daemon/) or "x.h" (its own folder).
target_of() {
	local inc=$1 from_dir=$2
	if [[ $inc == */* ]]; then
		if [[ $inc == lib/* ]]; then echo lib; else echo "${inc%%/*}"; fi
	else
		folder_of "$from_dir/$inc"
	fi
}

edges=()
fail=0
while IFS= read -r f; do
	from=$(folder_of "$f")
	dir=${f%/*}
	while IFS= read -r inc; do
		to=$(target_of "$inc" "$dir")
		if [[ $inc == */* && ! -f $inc && ! -f daemon/$inc ]]; then
			echo "check-includes: $f includes \"$inc\", which is no file of lib/ or daemon/." >&2
			fail=1
			continue
		fi
		if [[ $inc == *_int.h && $to != "$from" ]]; then
			echo "check-includes: $f includes $inc, private to daemon/$to/." >&2
			fail=1
		fi
		if [[ $from == lib && $to != lib ]]; then
			echo "check-includes: $f (lib/) includes $inc of daemon/; lib/ may include only lib/." >&2
			fail=1
		fi
		[[ $to != "$from" ]] && edges+=("$from $to")
	done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done < <(find lib daemon -name '*.[ch]' | sort)

uniq_edges=$(printf '%s\n' "${edges[@]}" | sort -u)
if ((verbose)); then
	echo "$uniq_edges" | awk '{d[$1] = d[$1] " " $2} END {for (k in d) print k " ->" d[k]}' | sort
fi
# tsort prints "input contains a loop" and the loop's members on stderr.
if ! err=$(echo "$uniq_edges" | tsort 2>&1 >/dev/null) || [[ -n $err ]]; then
	echo "check-includes: the folders include each other in a cycle:" >&2
	echo "$err" | sed 's/^tsort: /  /' >&2
	fail=1
fi
if ((fail)); then
	exit 1
fi
echo "check-includes: $(echo "$uniq_edges" | wc -l) one-way doors between $(echo "$uniq_edges" | tr ' ' '\n' | sort -u | wc -l) folders, no cycle."
