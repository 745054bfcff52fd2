#!/usr/bin/env python3
"""A synthetic FreeBSD package repository shaped like a real jail's closure,
for benches/pkg.sh. Written from pkg-repository(5) and the format notes
(../shared/notes/pkg-anyhost.md), sharing no code with jbuild's src/:
python3's tarfile and hashlib, and the zstd program.

    python3 benches/pkg_repo.py OUT [PACKAGES] [MEGABYTES] [SEED]

OUT/All/NAME-VERSION.pkg   tar (pax) + zstd: +COMPACT_MANIFEST, +MANIFEST
                           (files with "1$<sha256>" sums, owners, modes),
                           then the files under /usr/local
OUT/data.pkg               tar + zstd holding `data`: {"packages": [...]}
OUT/meta.conf              version 2, packing_format tzst
OUT/top-level              the names no other package depends on, one a line

The closure (default 150 packages, about 400 MB unpacked) has many small
files (headers, locale data, man pages: 0.1-16 KiB, text-like, so they
compress as real ones do) and a few large ones (shared libraries and
databases of 5-40 MB, half random bytes), a dependency graph where each
package needs 0-4 packages made before it, and symlinks (libfoo.so ->
libfoo.so.N) as ports install them. The same SEED gives the same bytes.
"""

import hashlib
import io
import json
import os
import random
import subprocess
import sys
import tarfile

ABI = "FreeBSD:14:amd64"
MTIME = 1_700_000_000
WORDS = (b"the of and to in is that for it as with was on be by this are from or "
         b"an at which not have has but all were when we there can been one if "
         b"include define struct return static const void int char unsigned size").split()


CORPUS = b""


def text(rng, size):
    """Text-like bytes: a slice of a corpus of words, at a random place."""
    global CORPUS
    if not CORPUS:
        words = bytearray()
        while len(words) < 4 << 20:
            words += rng.choice(WORDS) + (b"\n" if rng.random() < 0.1 else b" ")
        CORPUS = bytes(words)
    out = bytearray()
    while len(out) < size:
        at = rng.randrange(len(CORPUS) - 4096)
        out += CORPUS[at:at + min(4096, size - len(out))]
    return bytes(out)


def binary(rng, size):
    # Half random (code), half structured (tables, padding): about 2:1 in zstd.
    half = size // 2
    table = bytes(range(256)) * (half // 256 + 1)
    return os.urandom(size - half) + table[:half]


def plan(rng, count, megabytes):
    """(name, deps, files) for each package: files as (path, size, kind)."""
    budget = megabytes * 1_000_000
    large_total = budget * 45 // 100  # a few large files hold ~45 %
    pkgs = []
    for i in range(count):
        kind = "lib" if i < count * 2 // 3 else "app"
        name = f"{kind}{i:03d}-{rng.choice(['core', 'util', 'net', 'xml', 'db', 'py', 'gtk'])}"
        if i == 0:
            name = "pkg"  # every jail has it (jbuild installs it alongside)
        deps = sorted(set(p[0] for p in rng.sample(pkgs, min(len(pkgs), rng.randint(0, 4)))))
        pkgs.append((name, deps, []))
    small_budget = budget - large_total
    # Small files: lognormal counts per package.
    for name, _, files in pkgs:
        n = max(3, int(rng.lognormvariate(4.2, 1.0)))
        for j in range(n):
            where = rng.choice(["include", "share/doc", "share/locale", "man/man3", "share"])
            files.append((f"/usr/local/{where}/{name}/f{j:04d}.txt", rng.randint(100, 16384), "text"))
    small = sum(s for p in pkgs for (_, s, _) in p[2])
    scale = small_budget / small
    for _, _, files in pkgs:
        files[:] = [(p, max(1, int(s * scale)), k) for (p, s, k) in files]
    # A few large files, in a few packages.
    left = large_total
    while left > 0:
        size = min(left, rng.randint(5_000_000, 40_000_000))
        name, _, files = rng.choice(pkgs)
        n = sum(1 for f in files if f[2] == "bin")
        files.append((f"/usr/local/lib/lib{name}.so.{n + 1}", size, "bin"))
        left -= size
    return pkgs


def pax_tar(entries):
    """A pax tar of (TarInfo, bytes or None)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for info, data in entries:
            t.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def info(path, size=0, mode=0o644, kind=tarfile.REGTYPE, link=""):
    i = tarfile.TarInfo(path)
    i.size, i.mode, i.type, i.linkname, i.mtime = size, mode, kind, link, MTIME
    i.uname, i.gname, i.uid, i.gid = "root", "wheel", 0, 0
    return i


def zstd(raw, level="-6"):
    return subprocess.run(["zstd", "-q", "-c", "-T0", level], input=raw,
                          stdout=subprocess.PIPE, check=True).stdout


def main():
    out = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 150
    megabytes = int(sys.argv[3]) if len(sys.argv) > 3 else 400
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 31
    rng = random.Random(seed)
    os.makedirs(f"{out}/All", exist_ok=True)
    pkgs = plan(rng, count, megabytes)
    versions = {name: f"1.{i % 7}.{i}" for i, (name, _, _) in enumerate(pkgs)}
    manifests = []
    unpacked = 0
    for name, deps, files in pkgs:
        version = versions[name]
        compact = {
            "name": name, "origin": f"bench/{name}", "version": version,
            "comment": f"{name} for the bench", "maintainer": "bench@example.invalid",
            "www": "https://example.invalid", "abi": ABI, "arch": "freebsd:14:x86:64",
            "prefix": "/usr/local", "flatsize": sum(s for (_, s, _) in files),
            "licenselogic": "single", "licenses": ["BSD2CLAUSE"], "desc": f"{name}, synthetic",
            "deps": {d: {"origin": f"bench/{d}", "version": versions[d]} for d in deps},
            "categories": ["bench"], "annotations": {"FreeBSD_version": "1403000"},
        }
        body, listed = [], {}
        for path, size, kind in files:
            data = text(rng, size) if kind == "text" else binary(rng, size)
            unpacked += size
            listed[path] = {"sum": "1$" + hashlib.sha256(data).hexdigest(), "uname": "root",
                            "gname": "wheel", "perm": "0755" if kind == "bin" else "0644"}
            body.append((info(path, size, 0o755 if kind == "bin" else 0o644), data))
            if kind == "bin":
                link = path.rsplit(".so.", 1)[0] + ".so"
                if link not in listed:
                    target = os.path.basename(path)
                    listed[link] = {"sum": "1$" + hashlib.sha256(target.encode()).hexdigest(),
                                    "uname": "root", "gname": "wheel", "perm": "0755",
                                    "symlink_target": target}
                    body.append((info(link, kind=tarfile.SYMTYPE, mode=0o755, link=target), None))
        manifest = dict(compact, files=listed, directories={}, config=[])
        head = [(info("+COMPACT_MANIFEST", len(c := json.dumps(compact).encode())), c),
                (info("+MANIFEST", len(m := json.dumps(manifest).encode())), m)]
        pkg = zstd(pax_tar(head + body))
        rel = f"All/{name}-{version}.pkg"
        with open(f"{out}/{rel}", "wb") as f:
            f.write(pkg)
        manifests.append(dict(compact, sum=hashlib.sha256(pkg).hexdigest(), pkgsize=len(pkg),
                              path=rel, repopath=rel))
    data = json.dumps({"groups": [], "expired_packages": [], "packages": manifests}).encode()
    with open(f"{out}/data.pkg", "wb") as f:
        f.write(zstd(pax_tar([(info("data", len(data)), data)]), "-19"))
    with open(f"{out}/meta.conf", "w") as f:
        f.write('version = 2;\npacking_format = "tzst";\nmanifests = "packagesite.yaml";\n'
                'data = "data";\nfilesite = "files";\nmanifests_archive = "packagesite";\n'
                'filesite_archive = "files";\ndata_archive = "data";\n')
    needed = {d for (_, deps, _) in pkgs for d in deps}
    with open(f"{out}/top-level", "w") as f:
        f.write("".join(f"{n}\n" for (n, _, _) in pkgs if n not in needed))
    nfiles = sum(len(p[2]) for p in pkgs)
    print(f"{len(pkgs)} packages, {nfiles} files, {unpacked / 1e6:.0f} MB unpacked, "
          f"{sum(m['pkgsize'] for m in manifests) / 1e6:.0f} MB of packages", file=sys.stderr)


if __name__ == "__main__":
    main()
