"""Probe the default model on the embedded countries KG from Python.

    python examples/probe_api.py                 # ~2-4 minutes on 2 CPU cores
    python examples/probe_api.py --budget 32     # a quick look
    python examples/probe_api.py --model tiny-random --budget 32   # random weights: seconds

Every probe is drawn by a known-probability design (the run defaults), which gives an
unbiased accuracy estimate for the whole KG next to the rates over probed edges.
"""

import argparse
import warnings

import kgprobe
from kgprobe.estimators import format_estimate
from kgprobe.ranking import weakest_first

parser = argparse.ArgumentParser()
parser.add_argument("--budget", type=int, default=128, help="model queries to spend")
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--out", default="runs", help="directory for the run file")
parser.add_argument("--model", default="default", help="a model spec, as `kgprobe run --model`")
args = parser.parse_args()
warnings.simplefilter("ignore")  # e.g. "only 6 wrong options for continent": expected on this KG

run = kgprobe.probe(
    "countries",  # an embedded KG name, a KG file, or a KnowledgeGraph
    args.model,  # "default": SmolLM2-135M; or "hf:...", "vllm:...", "openai:model@http://host/v1", a LanguageModel
    method="zp-lke",
    budget=args.budget,
    batch_size=args.batch_size,
    seed=0,
    probe_options={"num_examples": 20, "num_distractors": 19},
    store=args.out,
)

m = run.metrics
print(f"{run.rounds_played} rounds, {run.queries_spent} queries, {m.probed_edges} edges probed")
print(f"over probed edges: win {m.win_rate:.1%}, zero-sense {m.zero_sense_rate:.1%}, all-sense {m.all_sense_rate:.1%}")
est = run.accuracy_estimate()
print(f"KG-level accuracy (unbiased): {est.estimate:.1%}, 95% CI [{est.low:.1%}, {est.high:.1%}] from {est.n} probes")

print(f"model: {run.protocol['model']['label']}")  # what exactly was measured: run.protocol
print("weakest predicates (rates over the probed edges; accuracy of all the predicate's edges):")
accuracy = {e["label"]: e for e in run.estimates()["by_predicate"].values()}
for name, pm in weakest_first(run.by_predicate.items())[:3]:  # the report's ranking
    print(f"  {name}: win {pm.win_rate:.0%}, zero-sense {pm.zero_sense_rate:.0%} of {pm.probed_edges} edges; "
          f"accuracy {format_estimate(accuracy.get(name))}")
print("weakest facts:")
for edge in run.weakest(3):
    print(f"  {edge}")
print(f"run file: {run.path}")
run.close()
