#!/usr/bin/env bash
# A tour of the command line: two probing methods on the same KG, a report, a comparison.
#   bash examples/cli_tour.sh            # BUDGET=64 BATCH=32 OUT=runs by default
set -euo pipefail
BUDGET=${BUDGET:-64}
BATCH=${BATCH:-32}
OUT=${OUT:-runs/tour}
KGPROBE=${KGPROBE:-kgprobe}

# 1. Zero-prompt many-shot multiple choice on the embedded countries KG (the default).
$KGPROBE run --budget "$BUDGET" --batch-size "$BATCH" --out "$OUT" --plain --no-report
first=$(ls -t "$OUT"/*.kgrun | head -1)

# 2. The same KG with yes/no questions scored by log-probability.
$KGPROBE run --method yes-no-logprob --budget "$BUDGET" --batch-size "$BATCH" --out "$OUT" --plain --no-report
second=$(ls -t "$OUT"/*.kgrun | head -1)

# 3. A report (Markdown + self-contained HTML with plots) and its JSON form, which starts
#    with the run's protocol: what exactly was measured.
$KGPROBE report "$first"
$KGPROBE report "$first" --json > "$OUT/first.json"

# 4. Every probe of the first run as one JSON line (prompt, options, response, verdict, scores).
$KGPROBE export "$first" --samples "$OUT/first-samples.jsonl"

# 5. Side by side, with the subsumption rate η. compare refuses runs whose protocols differ
#    (here the method does, on purpose); --allow-different compares them under a warning.
$KGPROBE compare "$first" "$second" --allow-different
