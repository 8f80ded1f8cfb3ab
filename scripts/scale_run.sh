#!/usr/bin/env bash
# Scale run of the fast method (docs/benchmarks.md, "Scale").
#
# usage: scripts/scale_run.sh MB WORK_DIR [EMBED_NAMES]
#   MB           corpus size in megabytes (10^6 bytes), built by scripts/make_scale_corpus.py
#   WORK_DIR     the corpus goes to WORK_DIR/input, the project to WORK_DIR (settings from `init`)
#   EMBED_NAMES  embed_text.names, default "[]" (graph stages only); e.g. "[text_unit_text]"
# env: BIN (default target/release), SHARED (default ../shared)
# Leaves WORK_DIR/time.log (/usr/bin/time -v), WORK_DIR/rss.tsv (RSS sampled every 0.2 s),
# WORK_DIR/output/stats.json (per-step seconds) and prints a summary: wall time, peak RSS, output
# size, and per step its seconds and the highest RSS sampled while it ran.
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
python3 "$repo/scripts/set_embed_names.py" "$work/settings.yaml" "$names"
uptime > "$work/load.log"
/usr/bin/time -v "$bin/graphrag-rs" index --root "$work" --method fast -q 2> "$work/time.log" &
: > "$work/rss.tsv"
while kill -0 $! 2>/dev/null; do
  pid=$(pgrep -n -f "graphrag-rs index --root $work" || true)
  rss=$([ -n "$pid" ] && awk '/VmRSS/{print $2}' "/proc/$pid/status" 2>/dev/null || true)
  [ -n "$rss" ] && echo "$(date +%s.%N) $((rss / 1024))" >> "$work/rss.tsv"
  sleep 0.2
done
wait $!
uptime >> "$work/load.log"
python3 - "$work" <<'EOF'
import datetime, json, os, re, sys
work = sys.argv[1]
# Highest sampled RSS while each step ran (from its "running" to its "finished" log line).
samples = [tuple(map(float, l.split())) for l in open(os.path.join(work, "rss.tsv"))]
window = {}
for line in open(os.path.join(work, "logs", "indexing-engine.log")):
    m = re.match(r"(\S+?)(\.\d+)?Z\s+INFO .*?(running|finished) step=(\S+)", line)
    if m:
        t = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)
        window.setdefault(m.group(4), {})[m.group(3)] = t.timestamp() + float(m.group(2) or 0)
step_rss = {}
for step, w in window.items():
    t0, t1 = w.get("running", 0), w.get("finished", float("inf"))
    step_rss[step] = max((r for t, r in samples if t0 - 0.2 <= t <= t1 + 0.2), default=0)
t = open(os.path.join(work, "time.log")).read()
wall = re.search(r"Elapsed \(wall clock\) time.*: (\S+)", t).group(1)
rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", t).group(1))
stats = json.load(open(os.path.join(work, "output", "stats.json")))
size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(os.path.join(work, "output")) for f in fs)
tables = sum(os.path.getsize(os.path.join(work, "output", f)) for f in os.listdir(os.path.join(work, "output")) if f.endswith(".parquet"))
print(f"wall {wall}  peak RSS {rss / 1024:.0f} MB  output {size / 1e6:.1f} MB (tables {tables / 1e6:.1f} MB)")
for step, s in sorted(stats["workflows"].items(), key=lambda kv: -kv[1]["overall"]):
    print(f"  {step:32s} {s['overall']:8.2f} s  rows_out {s['rows_out']:>9}  max RSS while running {step_rss.get(step, 0):7.0f} MB")
EOF
