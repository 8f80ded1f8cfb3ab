#!/usr/bin/env python3
"""Sets `embed_text.names` in a project's settings.yaml (what `init` wrote), e.g. `[]` for the
graph stages only: scripts/set_embed_names.py SETTINGS_YAML NAMES (used by scale_run.sh and
shard_bench.sh)."""
import re
import sys

path, names = sys.argv[1], sys.argv[2]
s = open(path).read()
s = re.sub(r"(?m)^(embed_text:\n(?:  .*\n)*?)  names: .*\n", r"\1", s)
s = s.replace("embed_text:\n", f"embed_text:\n  names: {names}\n", 1)
open(path, "w").write(s)
