"""Iterate rounds yourself, stop early, and resume later with a bigger budget.

    python examples/early_stop.py

The run is saved after every round, so leaving the loop (or Ctrl-C, or a crash) loses
nothing: ``kgprobe.resume`` continues from the last round and ends exactly where an
unbroken run with the same seed would.
"""

import argparse
import warnings

import kgprobe

parser = argparse.ArgumentParser()
parser.add_argument("--budget", type=int, default=256)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--stop-after", type=int, default=2, help="leave the loop after this many rounds")
parser.add_argument("--out", default="runs")
args = parser.parse_args()
warnings.simplefilter("ignore")

run = kgprobe.probe("countries", "default", method="yes-no-logprob", budget=args.budget,
                    batch_size=args.batch_size, store=args.out, lazy=True)
for summary in run.rounds():
    m = summary.metrics
    print(f"round {summary.round}: {summary.queries_spent} queries, win {m.win_rate:.1%}, "
          f"zero-sense {m.zero_sense_rate:.1%}, {summary.responses_per_second:.1f} responses/s")
    if summary.round >= args.stop_after:
        print("stopping early; the run is saved")
        break
path = run.path
run.close()

# Later (or in another process): continue where it stopped, with twice the budget.
run = kgprobe.resume(path, budget=2 * args.budget)
print(f"resumed and finished: {run.rounds_played} rounds, {run.queries_spent} queries ({run.stop_reason})")
run.close()
