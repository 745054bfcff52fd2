#!/bin/sh
# jbuild's own package installer against pkg(8), on a FreeBSD host: the
# same packages installed over the same base by `pkg -r ROOT install` and
# by a jbuild build (`FROM freebsd:RELEASE` + `PKG ...`), and the two roots
# compared. It cannot run in Linux CI; it is for whoever first runs jbuild
# on FreeBSD (tests/README.md, "On a FreeBSD host").
#
# Usage, as root, from a checkout with the binary built:
#
#     sh tests/freebsd/pkg-oracle.sh [-j JBUILD] [-r RELEASE] [-k] [PACKAGE ...]
#
#   -j JBUILD   the jbuild binary (default target/release/jbuild)
#   -r RELEASE  the base release (default: this host's, e.g. 14.3)
#   -k          keep the work directory (printed) for a look afterwards
#   PACKAGE     what to install (default: curl jq pcre2 redis: libraries
#               with USE_LDCONFIG's @ldconfig, and redis's USERS= script)
#
# Both roots start from the base layer of one jbuild image (so the base is
# the same bytes); pkg(8) installs `pkg` and the packages into the first,
# jbuild's PKG step the same list into the second. Compared:
#   1. mtree(8) specifications of both trees (type, mode, owner, group,
#      size, sha256, link target, file flags, link count; not times), read
#      against each other: every difference is printed;
#   2. `pkg -r ROOT check -sa` (checksums) and `check -da` (dependencies)
#      on both: jbuild's must pass as pkg's does;
#   3. `pkg -r ROOT info -a`, and `pkg -r ROOT query` of every package's
#      files and sums, and of its dependencies, diffed;
#   4. users and groups: `pw -R ROOT usershow -a` and `groupshow -a` (the
#      text files), and what the C library reads in each root, chrooted:
#      `getent passwd` and `getent group` (pwd.db, group) and `pw usershow
#      -a` (getpwent over spwd.db); pwd.db and spwd.db are left out of 1.,
#      their bytes may differ for the same entries (hash table layout);
#   5. the library hints: `ldconfig -r` chrooted in each root (rtld's
#      /var/run/ld-elf.so.hints, and ld-elf32.so.hints with `-32` where
#      lib32 exists), pkg's root first given what rc.d/ldconfig does at
#      boot (`pkg -r` restarts the host's ldconfig, not the root's).
# Exit status 0 when all agree, 1 on any difference (each one printed),
# 2 when the script could not run.

set -eu

usage() {
	sed -n '9,17p' "$0" >&2
	exit 2
}

jbuild=target/release/jbuild
release=
keep=
while getopts j:r:kh opt; do
	case $opt in
	j) jbuild=$OPTARG ;;
	r) release=$OPTARG ;;
	k) keep=1 ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
packages=${*:-curl jq pcre2 redis}

die() {
	echo "pkg-oracle: $*" >&2
	exit 2
}
[ "$(uname -s)" = FreeBSD ] || die "runs on FreeBSD only"
[ "$(id -u)" = 0 ] || die "run as root (package owners and file flags)"
command -v pkg >/dev/null || die "needs pkg(8)"
[ -x "$jbuild" ] || die "no jbuild binary at $jbuild (cargo build --release, or -j)"
jbuild=$(realpath "$jbuild")
if [ -z "$release" ]; then
	release=$(freebsd-version -u | sed 's/-.*//')
fi

work=$(mktemp -d -t pkg-oracle)
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
	if [ -n "$keep" ]; then
		echo "pkg-oracle: kept $work"
	else
		chflags -R 0 "$work" 2>/dev/null || true
		rm -rf "$work"
	fi
}
trap cleanup EXIT
echo "pkg-oracle: FreeBSD $release, packages: pkg $packages, in $work"

export JBUILD_ROOT="$work/state"
jb() { "$jbuild" -q "$@"; }

# The layer blobs of IMAGE, in order, as files: the image exported as an
# OCI layout; its manifest (jbuild writes canonical JSON: `config` before
# `layers`) names the config first, then each layer.
layers() {
	rm -rf "$work/oci"
	jb export "$1" "oci:$work/oci:x" >/dev/null
	index=$work/oci/index.json
	m=$(grep -o 'sha256:[0-9a-f]\{64\}' "$index" | head -1 | cut -d: -f2)
	grep -o 'sha256:[0-9a-f]\{64\}' "$work/oci/blobs/sha256/$m" | tail -n +2 | cut -d: -f2 |
		while read -r l; do echo "$work/oci/blobs/sha256/$l"; done
}

# Unpacks the layers given, in order, into ROOT with owners, modes and flags.
unpack() {
	root=$1
	shift
	mkdir -p "$root"
	for l in "$@"; do
		tar -xpf "$l" --fflags --xattrs -C "$root"
	done
}

mkdir -p "$work/base" "$work/pkgs"
printf 'FROM freebsd:%s\n' "$release" >"$work/base/Jailfile"
printf 'FROM freebsd:%s\nPKG pkg %s\n' "$release" "$packages" >"$work/pkgs/Jailfile"
jb build -t pkg-oracle:base "$work/base" >/dev/null
jb build -t pkg-oracle:jbuild "$work/pkgs" >/dev/null

# shellcheck disable=SC2046 # one path a line, no spaces (blob names)
unpack "$work/by-pkg" $(layers pkg-oracle:base)
# shellcheck disable=SC2046
unpack "$work/by-jbuild" $(layers pkg-oracle:jbuild)
# shellcheck disable=SC2086 # the package list is words
ASSUME_ALWAYS_YES=yes pkg -r "$work/by-pkg" install -y pkg $packages >"$work/pkg-install.log" 2>&1 ||
	{ tail -20 "$work/pkg-install.log" >&2; die "pkg -r install failed"; }

differences=0
differ() {
	echo "pkg-oracle: DIFFERENT: $*"
	differences=$((differences + 1))
}

# 1. The trees. pkg's catalogue copies and caches are not part of an image
# (jbuild leaves them out of layers), and the database is compared by
# what pkg reads from it below.
cat >"$work/excludes" <<'EOF'
./var/cache/pkg
./var/db/pkg
./etc/pwd.db
./etc/spwd.db
./var/run/ld-elf.so.hints
./var/run/ld-elf32.so.hints
EOF
# What the root's own boot does for pkg's root: rc.d/ldconfig's hints.
chroot "$work/by-pkg" /bin/sh /etc/rc.d/ldconfig onestart >"$work/ldconfig.log" 2>&1 ||
	{ cat "$work/ldconfig.log" >&2; die "rc.d/ldconfig in pkg's root failed"; }
keys=type,mode,uname,gname,size,sha256digest,link,flags,nlink
for r in by-pkg by-jbuild; do
	mtree -c -n -k "$keys" -X "$work/excludes" -p "$work/$r" >"$work/$r.mtree"
done
if ! mtree -f "$work/by-pkg.mtree" -f "$work/by-jbuild.mtree" >"$work/mtree.diff" 2>&1; then
	cat "$work/mtree.diff"
	differ "the trees (mtree, left pkg -r, right jbuild; $work/mtree.diff)"
fi

# 2. pkg's own checks, on both.
for r in by-pkg by-jbuild; do
	for check in -sa -da; do
		if ! pkg -r "$work/$r" check "$check" >"$work/$r.check$check" 2>&1; then
			cat "$work/$r.check$check"
			differ "pkg -r ROOT check $check fails on $r"
		fi
	done
done

# 3. What pkg says is installed, and each package's files, sums and
# dependencies.
for r in by-pkg by-jbuild; do
	pkg -r "$work/$r" info -a >"$work/$r.info"
	pkg -r "$work/$r" query -a '%n-%v %Fp %Fs' | sort >"$work/$r.files"
	pkg -r "$work/$r" query -a '%n-%v %dn-%dv' | sort >"$work/$r.deps"
	pkg -r "$work/$r" query -a '%n-%v %o %a %k' | sort >"$work/$r.flags"
done
for what in info files deps flags; do
	if ! diff -u "$work/by-pkg.$what" "$work/by-jbuild.$what" >"$work/$what.diff"; then
		cat "$work/$what.diff"
		differ "pkg -r ROOT $what (- pkg -r, + jbuild)"
	fi
done

# 4. Users and groups: the text files through pw, the databases through
# the C library in each root.
for r in by-pkg by-jbuild; do
	pw -R "$work/$r" usershow -a >"$work/$r.users"
	pw -R "$work/$r" groupshow -a >"$work/$r.groups"
	chroot "$work/$r" /usr/bin/getent passwd >"$work/$r.getent-passwd"
	chroot "$work/$r" /usr/bin/getent group >"$work/$r.getent-group"
	chroot "$work/$r" /usr/sbin/pw usershow -a >"$work/$r.pwdb"
done
for what in users groups getent-passwd getent-group pwdb; do
	if ! diff -u "$work/by-pkg.$what" "$work/by-jbuild.$what" >"$work/$what.diff"; then
		cat "$work/$what.diff"
		differ "$what (- pkg -r, + jbuild)"
	fi
done

# 5. The library hints, as rtld reads them.
for r in by-pkg by-jbuild; do
	chroot "$work/$r" /sbin/ldconfig -r >"$work/$r.hints"
	if [ -e "$work/$r/usr/lib32" ]; then
		chroot "$work/$r" /sbin/ldconfig -32 -r >>"$work/$r.hints"
	fi
done
if ! diff -u "$work/by-pkg.hints" "$work/by-jbuild.hints" >"$work/hints.diff"; then
	cat "$work/hints.diff"
	differ "ldconfig -r (- pkg -r and rc.d/ldconfig, + jbuild)"
fi

if [ "$differences" -eq 0 ]; then
	echo "pkg-oracle: the same: trees, checks, info, files, dependencies, users, groups, hints"
	exit 0
fi
echo "pkg-oracle: $differences difference(s)"
exit 1
