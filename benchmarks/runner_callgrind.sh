#!/usr/bin/env bash
# Instructions per durable pipeline under callgrind: a 2,000- minus a 500-pipeline run of
# benchmarks/runner.py's workload, divided by 1,500 (start-up cancels out). Steady to a
# few percent (group-commit batch sizes still follow timing), so it sees changes that wall
# time on this noisy machine cannot. Needs valgrind; takes about a minute.
#   bash benchmarks/runner_callgrind.sh
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ir() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null .venv/bin/python benchmarks/runner.py \
    --one "$1" "$tmp/run-$1.db" 2>&1 | awk '/refs:/ { gsub(",", "", $4); print $4 }'
}
small=$(ir 500)
large=$(ir 2000)
echo "$(( (large - small) / 1500 )) instructions per pipeline"
