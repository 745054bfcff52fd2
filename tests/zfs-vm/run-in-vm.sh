#!/usr/bin/env bash
# run-in-vm.sh - run one command in a throwaway qemu guest whose kernel has
# the real OpenZFS module loaded: under KVM where the machine allows it (a
# probe guest must boot with it), else under pure TCG software emulation.
# jbuild's own copy of the recipe recorded by the project's ZFS notes; the
# qemu lane (tests/zfs-vm/lane.sh) and benches/zfs-diff.sh boot through it.
#
# usage: run-in-vm.sh HOSTDIR COMMAND [ARG...]
#        run-in-vm.sh --resolve   (only check the mirror has every package)
#
# * HOSTDIR is shared read-write (virtio-9p) at the SAME absolute path in the
#   guest; COMMAND runs as root in $PWD if that is inside HOSTDIR, else in
#   HOSTDIR, via busybox sh, PATH=/usr/sbin:/usr/bin:/sbin:/bin, stdin /dev/null.
# * COMMAND's stdout/stderr stream to ours; the exit status is COMMAND's
#   (124: ZFSVM_TIMEOUT hit; 125: VM/infrastructure failure, console shown).
# * Guest: Debian kernel 6.1 + the OpenZFS module built from zfs-dkms
#   (bookworm-backports), zfs zpool zdb zstream mount.zfs, busybox, and this
#   host's glibc + libgcc_s, so binaries built here (cargo test) run there.
# * Blank sparse raw disks /dev/vda, /dev/vdb... (deleted afterwards); their
#   names are in $ZFSVM_DISKS inside the guest.
# * The accelerator (first line on stderr, "zfsvm: accelerator: ..."): KVM
#   when /dev/kvm is readable and writable and a probe guest of this image
#   boots with it, loads OpenZFS and runs `zfs version` (a few seconds);
#   TCG otherwise, and the line says why. Nothing in the cached image
#   depends on the accelerator or the CPU model.
#
# Env: ZFSVM_CACHE (${XDG_CACHE_HOME:-~/.cache}/jbuild-zfsvm/<versions>)
#   ZFSVM_ACCEL=kvm|tcg: force one (a forced kvm whose probe fails is exit
#     125, never TCG); unset or "auto": the choice above
#   ZFSVM_KVM_CPU (host,-arch-capabilities) the CPU model under KVM
#   ZFSVM_CPU (max) the CPU model under TCG
#   ZFSVM_PROBE_TIMEOUT s (20) for the KVM probe guest; ZFSVM_PROBE_SILENT
#     s (5): the probe gives up on a kernel that printed nothing by then
#   ZFSVM_ACCEL_LOG=FILE: the accelerator line is appended there too
#   ZFSVM_MEM MiB (2048)  ZFSVM_SMP (2)  ZFSVM_DISKS count (1)
#   ZFSVM_DISK_SIZE (2G)  ZFSVM_TIMEOUT s (1800)
#   ZFSVM_POOL=name: "zpool create -f name /dev/vda" first
#   ZFSVM_ENV="VAR ...": host variables copied into the guest
#   ZFSVM_SHARE="/dir ...": more host dirs shared at the same path
#   ZFSVM_EXTRA_BINS="strace ...": host programs (+libs) added to the image
#   ZFSVM_VERBOSE=1: print timings and the guest console
#   ZFSVM_KVER/ZFSVM_KPKGVER/ZFSVM_ZFSVER: override the pinned versions
# The first run builds into the cache (about 3.5 min on 2 cores; needs the
# machine's Debian mirror, gcc-12, make, binutils, cpio, xz-utils,
# busybox-static, qemu-system-x86; /etc/apt is not touched). Later runs on
# the same machine reuse it; other versions get their own cache directory.
set -euo pipefail

KVER=${ZFSVM_KVER:-6.1.0-56-amd64}          # Debian kernel ABI (bookworm-security)
KPKGVER=${ZFSVM_KPKGVER:-6.1.192-2}
ZFSVER=${ZFSVM_ZFSVER:-2.3.2-2~bpo12+2}     # bookworm-backports/contrib
# keyed by the pinned versions (and the recipe's revision): a new pin builds afresh
CACHE=${ZFSVM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/jbuild-zfsvm/r1-$KVER-$KPKGVER-${ZFSVER//[~+]/_}}
EXTRA_BINS=$(echo ${ZFSVM_EXTRA_BINS:-})   # (word-split: spaces do not matter)
# one initramfs per set of extra programs, so runs that add other ones
# (the lane adds docker-registry; benches/zfs-diff.sh none) do not rebuild
# each other's, nor swap it under a guest that is booting
INITRD=$CACHE/initrd-$(printf '%s' "$EXTRA_BINS" | sha256sum | cut -c1-12).img
now() { date +%s.%N; }
el() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }
say() { echo "zfsvm: $*" >&2; }

# ------------------------------------------------------------ build: module
# has_version PKG VERSION: the mirror has it (`apt-cache show PKG=VERSION`
# exits 0 even when it does not)
has_version() { apt-cache madison "$1" 2>/dev/null | awk -F' *[|] *' -v v="$2" '$2 == v {f = 1} END {exit !f}'; }
# candidate PKG: the version apt would install (empty when there is none)
candidate() { apt-cache policy "$1" 2>/dev/null | sed -n 's/^ *Candidate: //p' | grep -v '^(none)$' | head -1; }
# resolve PKG WANTED [exact]: WANTED when the mirror has it, else (unless
# exact) the package's own candidate, said on stderr; fails naming the
# package when there is neither
resolve() {
  if [ -n "$2" ] && has_version "$1" "$2"; then echo "$2"; return 0; fi
  if [ -n "${3:-}" ]; then say "package $1: version ${2:-?} is not on the mirror (the OpenZFS packages must share one version): cannot build the guest"; return 1; fi
  local c; c=$(candidate "$1")
  if [ -z "$c" ]; then say "package $1: the mirror has no version of it (wanted ${2:-any}): cannot build the guest"; return 1; fi
  say "package $1: $2 is not on the mirror, using its candidate $c"; echo "$c"
}
# resolve_packages DIR: a private apt set-up under DIR (the machine's
# mirrors, /etc/apt untouched; APT_CONFIG stays exported for the download)
# and every package the guest is made of resolved to a version the mirror
# has -> WANT (PKG=VERSION ...), KVER, KPKGVER, ZFSVER, KCOMMON. Fails, naming the
# package, before anything is downloaded.
resolve_packages() {
  local B=$1 K=/usr/share/keyrings/debian-archive-keyring.gpg MAIN SEC
  mkdir -p "$B"/apt/{state/lists/partial,cache/archives/partial,parts}
  local uris
  uris=$({ awk '/^URIs:/{print $2}' /etc/apt/sources.list.d/*.sources
           awk '$1 == "deb" {for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; break}}' \
             /etc/apt/sources.list /etc/apt/sources.list.d/*.list; } 2>/dev/null || true)
  MAIN=$(echo "$uris" | grep -E '/debian/?$' | head -1 || true)
  SEC=$(echo "$uris" | grep -E '/debian-security/?$' | head -1 || true)
  MAIN=${MAIN:-http://deb.debian.org/debian} SEC=${SEC:-http://deb.debian.org/debian-security}
  cat >"$B/apt/sources.list" <<EOF
deb [signed-by=$K] $MAIN bookworm main contrib
deb [signed-by=$K] $MAIN bookworm-updates main contrib
deb [signed-by=$K] $MAIN bookworm-backports main contrib
deb [signed-by=$K] $SEC bookworm-security main contrib
EOF
  cat >"$B/apt/apt.conf" <<EOF
Dir::Etc::SourceList "$B/apt/sources.list";
Dir::Etc::SourceParts "$B/apt/parts";
Dir::Etc::PreferencesParts "$B/apt/parts";
Dir::State "$B/apt/state";
Dir::State::status "/dev/null";
Dir::Cache "$B/apt/cache";
APT::Sandbox::User "root";
Acquire::Check-Valid-Until "false";
EOF
  export APT_CONFIG=$B/apt/apt.conf   # private apt setup; /etc/apt is untouched
  say "resolving package versions"; apt-get -qq update >&2
  # The security archive keeps only the newest kernel ABI, and a source's
  # packages move on one at a time (linux-kbuild-6.1 went to 6.1.192-3
  # while linux-image stayed at 6.1.192-2): every package's version is
  # resolved on its own, and all of them before anything is downloaded.
  if ! has_version "linux-image-$KVER" "$KPKGVER"; then
    KVER=$(apt-cache depends linux-image-amd64 | sed -n 's/.*Depends: linux-image-\(.*-amd64\)$/\1/p' | head -1)
    [ -n "$KVER" ] || { say "no linux-image-*-amd64 on the mirror (pinned linux-image-${ZFSVM_KVER:-6.1.0-56-amd64})"; return 1; }
    KPKGVER=$(candidate "linux-image-$KVER")
    say "pinned kernel gone from the mirror, using $KVER $KPKGVER"
  fi
  if ! has_version zfs-dkms "$ZFSVER"; then
    ZFSVER=$(apt-cache madison zfs-dkms | awk -F' *[|] *' '/backports/{print $2; exit}')
    say "pinned OpenZFS gone from the mirror, using ${ZFSVER:-nothing}"
  fi
  KCOMMON=${KVER%-amd64}-common   # (build_module's too)
  local KBUILD; KBUILD=linux-kbuild-$(echo "$KVER" | cut -d. -f1,2)
  local p v; WANT=()
  # the kernel's own packages: the image's version where the mirror has it
  for p in "linux-image-$KVER" "linux-headers-$KVER" "linux-headers-$KCOMMON" "$KBUILD"; do
    v=$(resolve "$p" "$KPKGVER") || return 1; WANT+=("$p=$v"); done
  # OpenZFS's packages: one version, the backports one zfs-dkms has
  for p in zfs-dkms zfsutils-linux libzfs6linux libzpool6linux libnvpair3linux libuutil3linux; do
    v=$(resolve "$p" "$ZFSVER" exact) || return 1; WANT+=("$p=$v"); done
  say "resolved: ${WANT[*]}"
}
build_module() {  # -> $CACHE/vmlinux $CACHE/ko/{spl,zfs}.ko $CACHE/root
  local B=$CACHE/work R=$CACHE/root t0
  t0=$(now); rm -rf "$B" "$R" "$CACHE/ko" "$CACHE/vmlinux"
  mkdir -p "$B"/apt/{state/lists/partial,cache/archives/partial,parts} "$B/debs" "$R"
  resolve_packages "$B" || return 1
  say "downloading packages"
  (cd "$B/debs" && apt-get -qq download "${WANT[@]}" >&2)
  unset APT_CONFIG
  for d in "$B"/debs/*.deb; do dpkg-deb -x "$d" "$R"; done
  # Debian's flavour header Makefile includes the common one by absolute path
  sed -i "s#^include /usr/src/#include $R/usr/src/#" "$R/usr/src/linux-headers-$KVER/Makefile"
  local Z; Z=$(echo "$R"/usr/src/zfs-*); cp -a "$Z" "$B/zfs"
  say "building OpenZFS ${Z##*/} kernel module for $KVER (~3-5 min on 2 cores)"
  (cd "$B/zfs" && ./configure -q --with-config=kernel \
      --with-linux="$R/usr/src/linux-headers-$KCOMMON" \
      --with-linux-obj="$R/usr/src/linux-headers-$KVER" >"$B/configure.log" 2>&1 &&
   make -s -j"$(nproc)" -C module >"$B/make.log" 2>&1) ||
    { tail -n 30 "$B/configure.log" "$B/make.log" >&2 2>/dev/null; return 1; }
  mkdir -p "$CACHE/ko"
  strip --strip-debug -o "$CACHE/ko/spl.ko" "$B/zfs/module/spl.ko"
  strip --strip-debug -o "$CACHE/ko/zfs.ko" "$B/zfs/module/zfs.ko"
  # boot the uncompressed ELF vmlinux (PVH entry): saves ~2.5 s of emulated unxz
  local v=$R/boot/vmlinuz-$KVER off
  off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$v" | head -1 | cut -d: -f1)
  tail -c +$((off + 1)) "$v" | xz -dcq >"$CACHE/vmlinux.tmp" 2>/dev/null || true
  [ "$(head -c4 "$CACHE/vmlinux.tmp" | od -An -tx1 | tr -d ' ')" = 7f454c46 ] ||
    { say "could not extract vmlinux from $v"; return 1; }
  # keep only what build_initramfs needs
  rm -rf "$B" "$R/usr/src" "$R/usr/lib/linux-kbuild-"* "$R/usr/share"
  find "$R/lib/modules" -name '*.ko' | grep -vE '/(virtio|block|9p|netfs|fscache)/' | xargs rm -f
  printf 'kernel %s %s\nzfs %s\n' "$KVER" "$KPKGVER" "$ZFSVER" >"$CACHE/versions"
  mv "$CACHE/vmlinux.tmp" "$CACHE/vmlinux"
  say "kernel module built in $(el "$t0") s"
}

# --------------------------------------------------------- build: initramfs
guest_init() { cat <<'EOF'
#!/bin/sh
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=dumb LANG=C.UTF-8
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm; mount -t devpts devpts /dev/pts
for d in /dev/shm /tmp /run /var/tmp /mnt; do mount -t tmpfs tmpfs $d; done
ln -s /proc/self/fd /dev/fd; ln -s fd/0 /dev/stdin; ln -s fd/1 /dev/stdout; ln -s fd/2 /dev/stderr
st() { read -r up _ </proc/uptime; echo "$up $*" >>/run/timings; }
st kernel-up
while read -r m; do insmod /lib/modules/$m.ko || echo "zfsvm: insmod $m failed" >/dev/console; done </lib/modules/order
st modules-loaded
O=trans=virtio,version=9p2000.L,msize=262144
mount -t 9p -o $O zfsvmctl /ctl || { echo "zfsvm: cannot mount ctl" >/dev/console; poweroff -f; }
. /ctl/env
i=0; while eval "p=\${ZFSVM_SHARE_$i:-}"; [ -n "$p" ]; do
  mkdir -p "$p"; mount -t 9p -o $O,cache=mmap zfsvm$i "$p"; i=$((i + 1)); done
# no udevd here: fake its db (+ one devlink) for each block device, now and on
# every uevent; else "zpool create pool /dev/vda" waits 30 s for udev and fails
uevent /sbin/zfsvm-udev & /sbin/zfsvm-udev
st ready
rc=0
if [ -n "${ZFSVM_POOL:-}" ]; then
  zpool create -f "$ZFSVM_POOL" /dev/vda >>/ctl/stderr 2>&1 || rc=125; st pool-created
fi
if [ $rc = 0 ]; then
  cd "$ZFSVM_CWD" && /bin/sh /ctl/cmd </dev/null >>/ctl/stdout 2>>/ctl/stderr; rc=$?
fi
st command-done
cp /run/timings /ctl/timings; echo $rc >/ctl/rc.tmp; mv /ctl/rc.tmp /ctl/rc
sync; poweroff -f
EOF
}
fake_udev() { cat <<'EOF'
#!/bin/sh
mkdir -p /run/udev/data /dev/disk/zfsvm
for f in /sys/class/block/*/dev; do
  n=${f%/dev}; n=${n##*/}; d=$(cat "$f"); [ -e "/run/udev/data/b$d" ] && continue
  ln -sf "../../$n" "/dev/disk/zfsvm/$n"
  printf 'S:disk/zfsvm/%s\nI:1\n' "$n" >"/run/udev/data/.b$d" && mv "/run/udev/data/.b$d" "/run/udev/data/b$d"
done
EOF
}

build_initramfs() {
  local R=$CACHE/root I=$CACHE/initramfs.d L t0 b m; t0=$(now)
  local KVER; KVER=$(awk '$1 == "kernel" {print $2}' "$CACHE/versions")
  rm -rf "$I"; mkdir -p "$I"/{bin,sbin,usr/bin,usr/sbin,lib/x86_64-linux-gnu,lib64,etc/zfs,root,proc,sys,dev,tmp,run,var/tmp,mnt,ctl}
  ln -s ../lib "$I/usr/lib"; L=$I/lib/x86_64-linux-gnu
  ! ldd /bin/busybox >/dev/null 2>&1 || { say "/bin/busybox must be static (busybox-static)"; return 1; }
  cp /bin/busybox "$I/bin/"
  for b in $(/bin/busybox --list); do [ -e "$I/bin/$b" ] || ln -s busybox "$I/bin/$b"; done
  local bins=()
  for b in zfs zpool zdb zstream mount.zfs zgenhostid; do cp "$R/sbin/$b" "$I/sbin/"; bins+=("$I/sbin/$b"); done
  cp -a "$R"/lib/x86_64-linux-gnu/lib{zfs,zfs_core,nvpair,uutil,zpool}.so* "$L/"
  for b in $EXTRA_BINS; do b=$(command -v "$b") || return 1; cp -L "$b" "$I/usr/bin/"; bins+=("$b"); done
  { LD_LIBRARY_PATH=$R/lib/x86_64-linux-gnu ldd "${bins[@]}" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3}'
    ls /lib/x86_64-linux-gnu/{libgcc_s.so.1,libc.so.6,libm.so.6,libpthread.so.0,libdl.so.2,librt.so.1,libutil.so.1,libresolv.so.2} 2>/dev/null
  } | sort -u | while read -r l; do [ -e "$L/${l##*/}" ] || cp -L "$l" "$L/"; done
  cp -L /lib64/ld-linux-x86-64.so.2 "$I/lib64/"
  # modules: virtio disk + 9p (with dependencies, from .modinfo), then spl, zfs
  declare -A seen=(); local order=() M=$R/lib/modules/$KVER/kernel
  add_mod() { local n=$1 f d; [ -n "${seen[$n]:-}" ] && return 0; seen[$n]=1
    f=$(find "$M" -name "$n.ko" -o -name "${n//_/-}.ko" | head -1)
    [ -n "$f" ] || { say "kernel module $n not found"; return 1; }
    for d in $(objcopy -O binary --only-section=.modinfo "$f" /dev/stdout | tr '\0' '\n' | sed -n 's/^depends=//p' | tr , ' '); do add_mod "$d"; done
    cp "$f" "$I/lib/modules/$n.ko"; order+=("$n"); }
  mkdir -p "$I/lib/modules"
  for m in virtio_pci virtio_blk 9pnet_virtio 9p; do add_mod $m; done
  cp "$CACHE/ko/spl.ko" "$CACHE/ko/zfs.ko" "$I/lib/modules/"; order+=(spl zfs)
  printf '%s\n' "${order[@]}" >"$I/lib/modules/order"
  echo 'root:x:0:0:root:/root:/bin/sh' >"$I/etc/passwd"; echo 'root:x:0:' >"$I/etc/group"
  ln -s /proc/self/mounts "$I/etc/mtab"
  guest_init >"$I/init"; fake_udev >"$I/sbin/zfsvm-udev"; chmod +x "$I/init" "$I/sbin/zfsvm-udev"
  # uncompressed: unpacking is cheaper than emulated decompression
  (cd "$I" && find . | cpio -o -H newc --quiet) >"$INITRD.tmp"
  mv "$INITRD.tmp" "$INITRD"; rm -rf "$I"
  say "initramfs built in $(el "$t0") s ($(du -m "$INITRD" | cut -f1) MiB)"
}

ensure_built() {
  mkdir -p "$CACHE"
  exec 9<"$CACHE"; flock 9                # one builder at a time
  [ -s "$CACHE/vmlinux" ] || { build_module; rm -f "$CACHE"/initrd*.img; }
  [ -s "$INITRD" ] || build_initramfs
  exec 9>&-
}

# ---------------------------------------------------------------------- run
if [ "${1:-}" = --resolve ]; then   # tests/run's early check: the versions exist
  if [ -s "$CACHE/vmlinux" ]; then say "guest image cached in $CACHE: nothing to download"; exit 0; fi
  B=$(mktemp -d "${TMPDIR:-/tmp}/zfsvm-resolve.XXXXXX"); trap 'rm -rf "$B"' EXIT
  resolve_packages "$B" || { say "the guest cannot be built from this machine's mirror"; exit 1; }
  exit 0
fi
[ $# -ge 2 ] || { sed -n '2,47p' "$0" >&2; exit 2; }
DIR=$(realpath "$1"); shift
[ -d "$DIR" ] || { say "$DIR is not a directory"; exit 2; }
case ${ZFSVM_ACCEL:-auto} in auto | kvm | tcg) ;;
  *) say "ZFSVM_ACCEL=$ZFSVM_ACCEL: expected kvm, tcg or auto"; exit 2 ;; esac
T0=$(now)
trap '[ $? = 0 ] || { say "build failed"; exit 125; }' EXIT
ensure_built
trap - EXIT
RUN=$(mktemp -d "${TMPDIR:-/tmp}/zfsvm-run.XXXXXX")
QPID= TPIDS=()
cleanup() {
  [ -z "$QPID" ] || kill "$QPID" 2>/dev/null || true
  for p in "${TPIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$RUN"
}
trap cleanup EXIT; trap 'exit 130' INT TERM
sq() { printf "'%s'" "${1//\'/\'\\\'\'}"; }      # POSIX shell single-quoting

# qemu_cmd ACCEL CPU DIR [KERNEL ARGS]: the command line of a guest of this
# image in QEMU (console DIR/console.log, control share DIR/ctl); the caller
# adds its shares and disks.
qemu_cmd() {
  QEMU=(qemu-system-x86_64 -accel "$1" -cpu "$2"
    -m "${ZFSVM_MEM:-2048}" -smp "${ZFSVM_SMP:-2}" -nodefaults -no-user-config
    -display none -no-reboot -serial "file:$3/console.log"
    -kernel "$CACHE/vmlinux" -initrd "$INITRD"
    -append "console=ttyS0 quiet loglevel=3 panic=-1 ${ZFSVM_APPEND:-} ${4:-}"
    -virtfs "local,path=$3/ctl,mount_tag=zfsvmctl,security_model=none,id=zfsvmctl")
}

# ------------------------------------------------------------- accelerator
# KVM makes the guest run at the host's speed, but a /dev/kvm may be there
# and still not boot this guest: a KVM that refuses an MSR of `-cpu host`
# (qemu aborts at once), or one without hardware virtualisation (kvm-pvm)
# that crawls through the firmware and never reaches the kernel. So only a
# guest that booted, loaded the module and ran a host-built program counts.
# The probe runs the real image with the real memory and vCPUs, so what it
# proves holds for the run; a kernel that printed nothing after
# ZFSVM_PROBE_SILENT s (a real KVM prints its first line well within one)
# ends it early.
KVM_CPU=${ZFSVM_KVM_CPU:-host,-arch-capabilities}
since() { awk -v a="$1" -v b="$(now)" -v s="$2" 'BEGIN { exit !(b - a >= s) }'; }
probe_kvm() {  # -> 0 when a guest boots under KVM; WHY says what was seen
  local P=$RUN/probe t0 qrc=0 secs=${ZFSVM_PROBE_TIMEOUT:-20} silent=${ZFSVM_PROBE_SILENT:-5} mute=
  if [ ! -e /dev/kvm ]; then WHY="no /dev/kvm"; return 1; fi
  if [ ! -r /dev/kvm ] || [ ! -w /dev/kvm ]; then
    WHY="/dev/kvm is not readable and writable by uid $(id -u)"; return 1
  fi
  mkdir -p "$P/ctl"; : >"$P/ctl/stdout"; : >"$P/ctl/stderr"
  echo 'zfs version && test -c /dev/zfs' >"$P/ctl/cmd"; echo "ZFSVM_CWD=/" >"$P/ctl/env"
  qemu_cmd kvm "$KVM_CPU" "$P" loglevel=6; t0=$(now)   # (the last loglevel= counts)
  timeout "$secs" "${QEMU[@]}" </dev/null >"$P/qemu.log" 2>&1 &
  QPID=$!
  while kill -0 "$QPID" 2>/dev/null; do
    if [ ! -s "$P/console.log" ] && since "$t0" "$silent"; then mute=1; kill "$QPID"; break; fi
    sleep 0.2
  done
  wait "$QPID" || qrc=$?; QPID=
  if [ "$(cat "$P/ctl/rc" 2>/dev/null)" = 0 ]; then
    WHY="a probe guest booted, loaded OpenZFS and ran zfs version in $(el "$t0") s"; return 0
  fi
  if [ -s "$P/ctl/rc" ]; then
    WHY="the probe guest booted but \`zfs version\` failed ($(tail -n 1 "$P/ctl/stderr" | cut -c1-160))"
  elif [ -n "$mute" ]; then WHY="the probe guest's kernel printed nothing in $silent s (this KVM does not run it at speed)"
  elif [ "$qrc" = 124 ]; then WHY="the probe guest did not finish in $secs s"
  else
    WHY="qemu ended without a result (status $qrc): $({ grep -v '^$' "$P/qemu.log"
      grep -v '^$' "$P/console.log" | tail -n 1; } 2>/dev/null | head -n 1 | cut -c1-160)"
  fi
  return 1
}
# (probe_kvm's stderr: bash's own "Aborted" report of a qemu that aborts;
# what the probe saw is in WHY)
case ${ZFSVM_ACCEL:-auto} in
  tcg) ACCEL=tcg WHY="forced by ZFSVM_ACCEL=tcg" ;;
  kvm) probe_kvm 2>/dev/null || { WHY="ZFSVM_ACCEL=kvm, but KVM does not work here (cpu $KVM_CPU): $WHY"
      say "accelerator: none: $WHY"; [ -z "${ZFSVM_ACCEL_LOG:-}" ] || echo "none: $WHY" >>"$ZFSVM_ACCEL_LOG"
      exit 125; }
    ACCEL=kvm WHY="forced by ZFSVM_ACCEL=kvm; $WHY" ;;
  *) if probe_kvm 2>/dev/null; then ACCEL=kvm; else ACCEL=tcg WHY="not kvm: $WHY"; fi ;;
esac
if [ "$ACCEL" = kvm ]; then CPU=$KVM_CPU; else CPU=${ZFSVM_CPU:-max}; fi
say "accelerator: $ACCEL (cpu $CPU): $WHY"
[ -z "${ZFSVM_ACCEL_LOG:-}" ] || echo "$ACCEL (cpu $CPU): $WHY" >>"$ZFSVM_ACCEL_LOG"

mkdir "$RUN/ctl"; : >"$RUN/ctl/stdout"; : >"$RUN/ctl/stderr"
{ for a in "$@"; do sq "$a"; printf ' '; done; echo; } >"$RUN/ctl/cmd"
case "$PWD/" in "$DIR"/*) CWD=$PWD ;; *) CWD=$DIR ;; esac
shares=("$DIR"); for s in ${ZFSVM_SHARE:-}; do shares+=("$(realpath "$s")"); done
mapfile -t shares < <(printf '%s\n' "${shares[@]}" | awk '!seen[$0]++ {print length, $0}' | sort -n -s | cut -d' ' -f2-)
qargs=() dnames=""
for i in "${!shares[@]}"; do
  qargs+=(-virtfs "local,path=${shares[$i]},mount_tag=zfsvm$i,security_model=none,multidevs=remap,id=zfsvm$i")
done
for i in $(seq 1 "${ZFSVM_DISKS:-1}"); do
  truncate -s "${ZFSVM_DISK_SIZE:-2G}" "$RUN/disk$i.img"
  qargs+=(-drive "file=$RUN/disk$i.img,format=raw,if=virtio,cache=unsafe")
  dnames+=" /dev/vd$(printf "\\x$(printf %x $((96 + i)))")"
done
{ for i in "${!shares[@]}"; do echo "ZFSVM_SHARE_$i=$(sq "${shares[$i]}")"; done
  echo "ZFSVM_CWD=$(sq "$CWD")"; echo "export ZFSVM_DISKS=$(sq "${dnames# }")"
  [ -z "${ZFSVM_POOL:-}" ] || echo "export ZFSVM_POOL=$(sq "$ZFSVM_POOL")"
  for v in ${ZFSVM_ENV:-}; do [ -z "${!v+x}" ] || echo "export $v=$(sq "${!v}")"; done
} >"$RUN/ctl/env"
T1=$(now)
qemu_cmd "$ACCEL" "$CPU" "$RUN"
timeout "${ZFSVM_TIMEOUT:-1800}" "${QEMU[@]}" "${qargs[@]}" </dev/null &
QPID=$!
tail -s 0.2 -c +1 -f --pid=$QPID "$RUN/ctl/stdout" & TPIDS+=($!)
tail -s 0.2 -c +1 -f --pid=$QPID "$RUN/ctl/stderr" >&2 & TPIDS+=($!)
qrc=0; wait "$QPID" || qrc=$?; QPID=
for p in "${TPIDS[@]}"; do wait "$p" 2>/dev/null || true; done; TPIDS=()
if [ -s "$RUN/ctl/rc" ]; then rc=$(cat "$RUN/ctl/rc")
else
  rc=125; [ "$qrc" != 124 ] || { rc=124; say "timed out after ${ZFSVM_TIMEOUT:-1800} s"; }
  say "VM ended without a result (qemu status $qrc); guest console:"; tail -n 40 "$RUN/console.log" >&2 || true
fi
if [ "${ZFSVM_VERBOSE:-0}" = 1 ]; then
  say "host prep (with the accelerator probe) $(awk -v a="$T0" -v b="$T1" 'BEGIN{printf "%.1f", b-a}') s, VM $(el "$T1") s; guest uptime at:"
  sed 's/^/zfsvm:   /' "$RUN/ctl/timings" >&2 2>/dev/null || true
  grep -v '^$' "$RUN/console.log" | sed 's/^/zfsvm: console: /' >&2 || true
fi
exit "$rc"
