# Issue 16's recipe, shared by benches/backends.sh and benches/build.sh
# (source this file): FROM scratch, COPY of a tree of FILES files (0–8 KiB
# of seeded random bytes each, about 200 MB for 50,000), then 19 small COPYs.
#
#   recipe_context CTX FILES   writes CTX/tree, CTX/small1..19, CTX/Jailfile
#
# The Jailfile uses only FROM and COPY, so the same text is a Containerfile.
recipe_context() {
  local ctx=$1 files=$2 i
  mkdir -p "$ctx/tree"
  python3 - "$ctx/tree" "$files" <<'PY'
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
r = random.Random(16)
for i in range(n):
    d = os.path.join(root, "d%02d/s%02d" % (i % 20, (i // 20) % 25))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%d" % i), "wb") as f:
        f.write(r.randbytes(r.randrange(0, 8193)))
PY
  {
    echo "FROM scratch"
    echo "COPY tree /srv/tree"
    for i in $(seq 1 19); do
      echo "small $i" > "$ctx/small$i"
      echo "COPY small$i /etc/small$i"
    done
  } > "$ctx/Jailfile"
}
