#!/usr/bin/env bash
# Scale run of the fast method (docs/benchmarks.md, "Scale").
#
# usage: scripts/scale_run.sh MB WORK_DIR [EMBED_NAMES]
#   MB           corpus size in megabytes (10^6 bytes), built by scripts/make_scale_corpus.py
#   WORK_DIR     the corpus goes to WORK_DIR/input, the project to WORK_DIR (settings from `init`)
#   EMBED_NAMES  embed_text.names, default "[]" (graph stages only); e.g. "[text_unit_text]"
# env: BIN (default target/release), SHARED (default ../shared)
# Leaves WORK_DIR/time.log (/usr/bin/time -v), WORK_DIR/output/stats.json (per-step seconds and
# peak RSS) and prints a summary: wall time, peak RSS, rows, output size.
set -euo pipefail
[ $# -ge 2 ] || { sed -n 2,10p "$0"; exit 2; }
repo=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-$repo/target/release}
shared=${SHARED:-$repo/../shared}
mb=$1
work=$(mkdir -p "$2" && cd "$2" && pwd)
names=${3:-[]}
rm -rf "$work/input" "$work/output" "$work/cache" "$work/logs"
python3 "$repo/scripts/make_scale_corpus.py" "$mb" "$work/input" --shared "$shared"
[ -f "$work/settings.yaml" ] || "$bin/graphrag-rs" init --root "$work" >/dev/null
python3 - "$work/settings.yaml" "$names" <<'EOF'
import re, sys
path, names = sys.argv[1], sys.argv[2]
s = open(path).read()
s = re.sub(r"(?m)^(embed_text:\n(?:  .*\n)*?)  names: .*\n", r"\1", s)
s = s.replace("embed_text:\n", f"embed_text:\n  names: {names}\n", 1)
open(path, "w").write(s)
EOF
uptime > "$work/load.log"
/usr/bin/time -v "$bin/graphrag-rs" index --root "$work" --method fast -q 2> "$work/time.log"
uptime >> "$work/load.log"
python3 - "$work" <<'EOF'
import json, os, re, sys
work = sys.argv[1]
t = open(os.path.join(work, "time.log")).read()
wall = re.search(r"Elapsed \(wall clock\) time.*: (\S+)", t).group(1)
rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", t).group(1))
stats = json.load(open(os.path.join(work, "output", "stats.json")))
size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(os.path.join(work, "output")) for f in fs)
tables = sum(os.path.getsize(os.path.join(work, "output", f)) for f in os.listdir(os.path.join(work, "output")) if f.endswith(".parquet"))
print(f"wall {wall}  peak RSS {rss / 1024:.0f} MB  output {size / 1e6:.1f} MB (tables {tables / 1e6:.1f} MB)")
for step, s in sorted(stats["workflows"].items(), key=lambda kv: -kv[1]["overall"]):
    print(f"  {step:32s} {s['overall']:8.2f} s  rows_out {s['rows_out']:>9}  peak_rss {s.get('peak_rss_mb', 0):7.0f} MB")
EOF
