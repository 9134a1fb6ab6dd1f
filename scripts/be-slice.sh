#!/usr/bin/env bash
# be-slice.sh: build a slice of the real Doris BE for ARM targets through
# dorisarm and report how much of it reads back at the target's flags.
#
# Usage: scripts/be-slice.sh --doris TREE [--target T[,T...]] [--work DIR]
#                            [--units FILE] [--mirror DIR|URL] [--cache DIR] [--jobs N]
#
#   --doris   a Doris 2.1 or 3.0 source tree with its BE source and both
#             submodules in place (be/src/clucene, be/src/apache-orc)
#   --target  dorisarm targets (default kunpeng920,graviton3)
#   --work    where the base, downloads and published slices go
#             (default ./be-slice-work); reruns reuse it
#   --units   object paths as --be-targets takes them, one a line
#             (default scripts/be-slice-units-<major.minor>.txt)
#   --mirror  Doris third-party archives (REPOSITORY_URL layout) for the base
#             (default: vars.sh's download URLs)
#   --cache   dorisarm's step cache (default WORK/cache; the C++ runtime step
#             takes about 8 minutes on 2 cores the first time)
#   --jobs    dorisarm's CPU budget (default 2)
#
# It runs, per tree:
#   1. scripts/be-slice-base.sh (an aarch64 third-party base from pinned
#      Debian 12 arm64 packages and upstream archives; NOT the release path)
#   2. per target: dorisarm build --compiler clang --thirdparty-base
#      BASE/installed --be-targets UNITS (against the target OS's sysroot and
#      the C++ runtime dorisarm builds; no waiver)
#   3. dorisarm scan --target T -o json of the published be-slice/
# and prints per target the configure time (the build:be step), the compile
# time (the slice's step), the units and the share of objects at the
# target's flags (scan summary.flags), and fails if a record names a waiver
# or the read-back is short of 100%.
#
# Needs: what `scripts/install-deps.sh --profile build` installs (clang-16,
# cmake, ninja, protoc, thrift, bubblewrap, ...), Go (to build bin/dorisarm),
# a JDK (JAVA_HOME, or one under /usr/lib/jvm), and arm64 as a dpkg foreign
# architecture (dpkg --add-architecture arm64 && apt-get update).
set -euo pipefail

prog=be-slice
die() { echo "$prog: $*" >&2; exit 1; }
usage() { sed -n '/^# Usage:/,/^#   --jobs/p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

here=$(cd "$(dirname "$0")/.." && pwd)
doris= targets=kunpeng920,graviton3 work=$PWD/be-slice-work units= mirror= cache= jobs=2
while [ $# -gt 0 ]; do
  case "$1" in
    --doris) [ $# -ge 2 ] || usage; doris=$2; shift 2 ;;
    --target) [ $# -ge 2 ] || usage; targets=$2; shift 2 ;;
    --work) [ $# -ge 2 ] || usage; work=$2; shift 2 ;;
    --units) [ $# -ge 2 ] || usage; units=$2; shift 2 ;;
    --mirror) [ $# -ge 2 ] || usage; mirror=$2; shift 2 ;;
    --cache) [ $# -ge 2 ] || usage; cache=$2; shift 2 ;;
    --jobs) [ $# -ge 2 ] || usage; jobs=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "$prog: unknown argument $1" >&2; usage ;;
  esac
done
[ -n "$doris" ] || usage
doris=$(cd "$doris" 2>/dev/null && pwd) || die "--doris: no such directory"
for f in be/src/util/murmur_hash3.cpp be/src/clucene/CMakeLists.txt be/src/apache-orc/CMakeLists.txt gensrc/script/gen_build_version.sh; do
  [ -e "$doris/$f" ] || die "$doris has no $f: the slice needs the BE source with both submodules in place"
done
gv=$doris/gensrc/script/gen_build_version.sh
major=$(sed -n 's/^build_version_major=//p' "$gv" | head -1); minor=$(sed -n 's/^build_version_minor=//p' "$gv" | head -1)
series=$major.$minor
units=${units:-$here/scripts/be-slice-units-$series.txt}
[ -f "$units" ] || die "no unit list for Doris $series: $units (pass --units FILE)"
mkdir -p "$work"; work=$(cd "$work" && pwd)
cache=${cache:-$work/cache}

if [ -z "${JAVA_HOME:-}" ]; then
  for j in /usr/lib/jvm/java-17-openjdk-* /usr/lib/jvm/*; do
    [ -f "$j/include/jni.h" ] && { JAVA_HOME=$j; break; }
  done
fi
[ -n "${JAVA_HOME:-}" ] && [ -f "$JAVA_HOME/include/jni.h" ] ||
  die "no JDK: set JAVA_HOME (the BE compiles JNI against \$JAVA_HOME/include; Debian: apt-get install openjdk-17-jdk-headless)"
export JAVA_HOME
for tool in go python3; do command -v "$tool" >/dev/null || die "$tool is not installed"; done

dorisarm=$here/bin/dorisarm
(cd "$here" && make -s build) || die "building bin/dorisarm failed"

base=$work/base-$series
echo "== base: $base (scripts/be-slice-base.sh)"
"$here/scripts/be-slice-base.sh" --doris "$doris" ${mirror:+--mirror "$mirror"} --downloads "$work/downloads" "$base"

list=$(grep -v '^\s*\(#\|$\)' "$units" | paste -sd,)
n=$(grep -vc '^\s*\(#\|$\)' "$units")
results=()
status=0
IFS=, read -ra tlist <<<"$targets"
for t in "${tlist[@]}"; do
  out=$work/out-$series-$t
  log=$work/build-$series-$t.log
  cmd=("$dorisarm" build --source "$doris" --target "$t" --compiler clang --thirdparty-base "$base/installed"
    --be-targets "$list" --cache "$cache" --out "$out" --jobs "$jobs")
  echo "== $t: ${cmd[*]:0:10} --be-targets <the $n units of $units> ${cmd[*]:12}"
  start=$(date +%s)
  if ! "${cmd[@]}" >"$log" 2>&1; then
    tail -30 "$log" >&2
    die "dorisarm build for $t failed (log: $log)"
  fi
  wall=$(( $(date +%s) - start ))
  pub=$(ls -d "$out"/*/"$t")
  "$dorisarm" scan --target "$t" -o json "$pub/be-slice" >"$work/scan-$series-$t.json" || true
  line=$(python3 - "$pub/dorisarm-build.json" "$work/scan-$series-$t.json" "$t" "$n" "$wall" <<'EOF'
import json, sys
rec = json.load(open(sys.argv[1])); scan = json.load(open(sys.argv[2]))
t, n, wall = sys.argv[3], int(sys.argv[4]), sys.argv[5]
def secs(s):  # a cached step keeps the time it took when it ran
    return s.get("ran_seconds", s["seconds"]) if s.get("cached") else s["seconds"]
steps = {s["id"]: s for s in rec["steps"]}
cfg = steps.get("build:be")
comp = [s for i, s in steps.items() if i.startswith("build:be") and i != "build:be"]
def waivers(o, path=""):
    if isinstance(o, dict):
        for k, v in o.items():
            if "waive" in k.lower() and v:
                yield f"{path}.{k}"
            yield from waivers(v, f"{path}.{k}")
    elif isinstance(o, list):
        for i, v in enumerate(o):
            yield from waivers(v, f"{path}[{i}]")
w = list(waivers(rec))
f = scan["summary"]["flags"]
# at_target is the share of compiled objects at the target's flags.
objs, at = f.get("objects", 0), (f.get("verdicts") or {}).get("target", 0)
share = 100.0 * f.get("at_target", 0)
print(json.dumps({
    "target": t, "doris": rec["cell"]["doris"], "compiler": rec["compiler"].get("version", rec["compiler"]) if isinstance(rec["compiler"], dict) else rec["compiler"],
    "configure_s": round(secs(cfg), 1) if cfg else None,
    "compile_s": round(sum(secs(s) for s in comp), 1) if comp else None,
    "compile_step": ",".join(s["id"] for s in comp),
    "cached": [i for i, s in steps.items() if s.get("cached")],
    "wall_s": int(wall), "units": n, "objects_read": objs, "at_target": at,
    "share": round(share, 2), "march": f.get("requested"), "verdicts": f.get("verdicts"), "landed": f.get("landed"),
    "cxx_runtime": (rec.get("cxx_runtime") or {}).get("name"), "waivers": w}))
EOF
)
  results+=("$line")
  echo "$line" >"$work/result-$series-$t.json"
  python3 -c 'import json,sys; r=json.loads(sys.argv[1]); sys.exit(0 if r["share"]==100.0 and not r["waivers"] and r["objects_read"]>=r["units"] else 1)' "$line" || status=1
done

echo
printf '%-12s %-12s %12s %12s %8s %6s %14s %s\n' target doris "configure s" "compile s" "wall s" units "at target" "waivers"
for r in "${results[@]}"; do
  python3 -c '
import json,sys; r=json.loads(sys.argv[1])
print("%-12s %-12s %12s %12s %8s %6s %14s %s" % (r["target"], r["doris"], r["configure_s"], r["compile_s"], r["wall_s"], r["units"],
  "%d/%d %.1f%%" % (r["at_target"], r["objects_read"], r["share"]), ",".join(r["waivers"]) or "none"))' "$r"
done
[ "$status" = 0 ] || die "a target's read-back is short of 100%, read fewer objects than units, or its record names a waiver (see above)"
