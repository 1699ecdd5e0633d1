#!/usr/bin/env bash
# timeout: 600
# The packages (issue 27, item 2): make deb (dpkg-buildpackage -us -uc -b on a clean copy of the
# tree, the release build) and make rpm (Debian's rpmbuild), reused when newer than every source
# file. Then:
#   the .deb holds exactly the expected files; lintian reports no error (E:);
#   its postinst, run in a private mount namespace over a copy of /etc (the host's group file and
#   dpkg database are never touched), creates the system group hak, twice without harm, and
#   starts nothing;
#   the .rpm holds the same files at the RPM places, and its %pre creates the group;
#   a two-node pair runs FROM THE EXTRACTED FILES (dpkg -x: usr/sbin/hakd and hakctl, the
#   example etc/hak/hak.conf.example adapted to the namespaces, checked by the packaged
#   hakctl check-config): wait-sync exits 5 while neither fresh disk is UpToDate, then the
#   initial sync, 32 MiB of random data written on the primary,
#   hakctl wait-sync, and both copies have the same sha256, the data's.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
require_cmd dpkg-deb dpkg-buildpackage lintian rpm rpmbuild unshare sha256sum nbdcopy jq

VERSION=$(sed -n 's/^#define HAK_VERSION "\(.*\)"/\1/p' "$REPO/include/hak/version.h")
ARCH=$(dpkg --print-architecture)
DEB=$REPO/build/deb/hak_${VERSION}_$ARCH.deb
RPMF=$REPO/build/rpm/RPMS/x86_64/hak-$VERSION-1.x86_64.rpm

# fresh FILE: FILE exists and no source file is newer (the packages take about 30 s each)
fresh() {
	[[ -f $1 ]] || return 1
	local newer
	newer=$(cd "$REPO" && git ls-files -co --exclude-standard 2>/dev/null | grep -v '^build/' |
		while read -r f; do [[ $f -nt $1 ]] && echo "$f"; done | head -n 3 | tr "\n" " ")
	[[ -z $newer ]] || {
		log "$(basename "$1") is older than $newer"
		return 1
	}
}

t0=$(date +%s.%N)
if fresh "$DEB"; then
	log "reusing $DEB"
else
	make -C "$REPO" -s deb >"$WORK/deb.log" 2>&1 || fail "make deb failed: $(tail -n 30 "$WORK/deb.log")"
	log "make deb took $(elapsed_since "$t0")s"
fi
[[ -f $DEB ]] || fail "make deb made no $DEB"

# every unit of packaging/ comes along
want="./etc/hak/hak.conf.example"
for u in "$REPO"/packaging/*.service; do
	want+=$'\n'"./lib/systemd/system/$(basename "$u")"
done
want+="
./usr/lib/ocf/resource.d/hak/hak
./usr/sbin/hak-attach
./usr/sbin/hak-crm-fence-peer
./usr/sbin/hak-crm-unfence-peer
./usr/sbin/hakctl
./usr/sbin/hakd
./usr/share/bash-completion/completions/hakctl
./usr/share/doc/hak/changelog.gz
./usr/share/doc/hak/copyright"
# every manual page of docs/ (hakd.8, hakctl.8, hak-attach.8, hak.conf.5, and any added later)
for m in "$REPO"/docs/*.[58]; do
	want+=$'\n'"./usr/share/man/man${m##*.}/$(basename "$m").gz"
done
for m in hakd.8 hakctl.8 hak-attach.8 hak.conf.5; do
	[[ $want == *"/$m.gz"* ]] || fail "docs/$m is missing"
done
want=$(LC_ALL=C sort <<<"$want")
got=$(dpkg-deb -c "$DEB" | awk '$1 !~ /^d/ {print $6}' | LC_ALL=C sort)
assert_eq "$got" "$want" "the files of $(basename "$DEB")"
dpkg-deb -c "$DEB" | awk '$6 ~ /usr\/sbin\/./ && $1 != "-rwxr-xr-x" {bad = bad $6 " "} END {exit bad != ""}' ||
	fail "a binary of the package is not mode 0755: $(dpkg-deb -c "$DEB" | grep usr/sbin/)"
deps=$(dpkg-deb -f "$DEB" Depends)
assert_contains "$deps" "adduser" "the package's Depends"
assert_contains "$deps" "libjansson4" "the package's Depends"

lintian "$DEB" >"$WORK/lintian.out" 2>&1 || true
log "lintian: $(grep -c '^[EWI]:' "$WORK/lintian.out") tag(s): $(grep '^[EWI]:' "$WORK/lintian.out" | tr '\n' ';')"
! grep -q '^E:' "$WORK/lintian.out" || fail "lintian reports errors: $(grep '^E:' "$WORK/lintian.out")"

# The release build, not the sanitizer one.
ROOT=$WORK/root
dpkg -x "$DEB" "$ROOT"
if nm -D "$ROOT/usr/sbin/hakd" | grep -q __asan; then
	fail "the packaged hakd is an ASan build"
fi
"$ROOT/usr/sbin/hak-attach" --help >/dev/null 2>&1 || fail "the packaged hak-attach --help failed"
assert_eq "$("$ROOT/usr/sbin/hakctl" --help | head -n 1)" "Usage: hakctl [--control SOCK] COMMAND [ARGS]" \
	"the packaged hakctl --help"

# The postinst in a private mount namespace: /etc is a copy without a hak group,
# /var/lib/systemd (deb-systemd-helper's state) a tmpfs.
dpkg-deb -e "$DEB" "$WORK/ctrl"
if grep -nE 'systemctl[^|]*(start|restart)|invoke-rc.d|deb-systemd-invoke' "$WORK/ctrl/postinst"; then
	fail "the postinst starts something"
fi
cp -a /etc "$WORK/etc"
sed -i '/^hak:/d' "$WORK/etc/group" "$WORK/etc/gshadow"
mkdir -p "$WORK/vls"
# shellcheck disable=SC2016 # the inner script expands its own arguments
unshare -m bash -c '
	set -e
	mount --bind "$1/etc" /etc
	mount --bind "$1/vls" /var/lib/systemd
	sh "$1/ctrl/postinst" configure
	sh "$1/ctrl/postinst" configure
	getent group hak' _ "$WORK" >"$WORK/postinst.out" 2>&1 || fail "the postinst failed: $(cat "$WORK/postinst.out")"
[[ $(tail -n 1 "$WORK/postinst.out") =~ ^hak:x:([0-9]+):$ ]] ||
	fail "no hak group after the postinst: $(cat "$WORK/postinst.out")"
gid=${BASH_REMATCH[1]}
((gid >= 100 && gid < 1000)) || fail "group hak got gid $gid, not a system gid"
assert_eq "$(grep -c '^hak:' "$WORK/etc/group")" 1 "hak lines in the copy of /etc/group"
log "postinst: system group hak, gid $gid, in the copy of /etc"

t0=$(date +%s.%N)
if fresh "$RPMF"; then
	log "reusing $RPMF"
else
	make -C "$REPO" -s rpm >"$WORK/rpm.log" 2>&1 || fail "make rpm failed: $(tail -n 30 "$WORK/rpm.log")"
	log "make rpm took $(elapsed_since "$t0")s"
fi
rwant=$(sed -e 's|^\./lib/systemd|/usr/lib/systemd|; s|^\./|/|; /\/usr\/share\/doc\/hak\//d' <<<"$want")
rwant=$(LC_ALL=C sort <<<"$rwant"$'\n'"/usr/share/doc/hak-$VERSION/README.md")
rgot=$(rpm -qlp "$RPMF" 2>/dev/null | grep -v '^/usr/lib/.build-id' | while read -r f; do
	[[ $f == /etc/hak || $f == /usr/share/doc/hak-$VERSION ]] || echo "$f"
done | LC_ALL=C sort)
assert_eq "$rgot" "$rwant" "the files of $(basename "$RPMF")"
assert_contains "$(rpm -qp --scripts "$RPMF" 2>/dev/null)" "getent group hak >/dev/null || groupadd -r hak" \
	"the rpm's %pre"

# ---- a pair from the extracted files --------------------------------------------------------
HAKD=$ROOT/usr/sbin/hakd
HAKCTL=$ROOT/usr/sbin/hakctl
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
PAIR_NO_START=1 pair_setup sync 64M
pair_report_logs
EX=$ROOT/etc/hak/hak.conf.example
for n in alpha beta; do
	mkdir -p "$WORK/$n-state"
	# the example's nodes are the namespaces' addresses already (192.0.2.1 and .2, port 7789)
	sed -e "s|control-socket /run/hak/hakd.sock|control-socket $WORK/$n.ctl|" \
		-e "s|state-dir /var/lib/hak|state-dir $WORK/$n-state|" \
		-e "s|backing /var/lib/hak/db.img|backing $WORK/$n.img|" \
		-e "s|nbd-socket /run/hak/db.nbd|nbd-socket $WORK/$n.nbd|" \
		-e "s|auth-key-file /etc/hak/repl.key|auth-key-file $WORK/repl.key|" \
		-e "s|io-engine auto|io-engine $HAK_IO_ENGINE|" "$EX" >"$WORK/$n.conf"
	sys=$(grep -v '^[[:space:]]*#' "$WORK/$n.conf" | grep -E '/run/hak|/var/lib/hak|/etc/hak' || true)
	[[ -z $sys ]] || fail "the adapted example still names a system path: $sys"
	out=$("$HAKCTL" check-config "$WORK/$n.conf") || fail "check-config of the adapted example: $out"
	"$HAKCTL" --config "$WORK/$n.conf" --node "$n" create-md db --force >>"$WORK/create-md.log" 2>&1 ||
		fail "create-md on $n with the packaged hakctl failed: $(cat "$WORK/create-md.log")"
done
node_start alpha
node_start beta
wait_repl alpha link Connected 20
# two fresh disks, neither UpToDate: wait-sync says it cannot end without the operator
rc=0
out=$(hk beta wait-sync --timeout 30 2>&1) || rc=$?
assert_eq "$rc" 5 "the packaged wait-sync before the first promotion ($out)"
assert_contains "$out" "neither copy of volume db is UpToDate (Inconsistent here, Inconsistent on the peer); promote the reference copy with 'hakctl primary db --force'" \
	"the packaged wait-sync's reason"
hk alpha primary db --force >/dev/null || fail "promoting alpha failed"
out=$(hk alpha wait-sync db --timeout 60) || fail "wait-sync after the initial sync: $out"
head -c 32M /dev/urandom >"$WORK/data"
nbdcopy "$WORK/data" "$(node_uri alpha)" || fail "writing 32 MiB on alpha failed"
out=$(hk beta wait-sync --timeout 60) || fail "wait-sync after the writes: $out"
log "$out"
hk alpha secondary db >/dev/null || fail "demoting alpha failed"
node_stop alpha
node_stop beta
a=$(sha256sum <"$WORK/alpha.img")
b=$(sha256sum <"$WORK/beta.img")
assert_eq "$b" "$a" "sha256 of beta's copy against alpha's"
d=$(head -c 32M "$WORK/beta.img" | sha256sum)
assert_eq "$d" "$(sha256sum <"$WORK/data")" "sha256 of the first 32 MiB of beta's copy against the data"
log "all checks passed"
