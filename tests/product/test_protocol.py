"""What exactly was measured: one set of defaults, the stored protocol, compare's refusal, export."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import kgprobe
from kgprobe.api import open_run, probe_settings
from kgprobe.cli import build_parser, main
from kgprobe.commands.run import settings_from_args
from kgprobe.engine import EngineConfig
from kgprobe.errors import InputError, StoreError
from kgprobe.protocol import build_protocol, gguf_label, protocol_differences, protocol_rows

FAST = dict(method="zp-lke", batch_size=16, budget=32, seed=5, progress=False, report=False,
            probe_options={"num_examples": 5, "num_distractors": 4})

def _class_defaults(cls) -> dict:
    import inspect

    return {k: p.default for k, p in inspect.signature(cls.__init__).parameters.items()
            if k != "self" and p.default is not inspect.Parameter.empty}


#: The full ZP-LKE options a run records when none is given: the project's 20 x 19 over
#: every other default of the probe class (separators, fixed examples, example seed).
from kgprobe.probes.zp_lke import ZeroPromptProbe  # noqa: E402

# New runs balance the examples over the options; the class default (older records) is the paper's.
ZP_LKE_DEFAULTS = {**_class_defaults(ZeroPromptProbe), "num_examples": 20, "num_distractors": 19,
                   "examples": "balanced"}


def cli_settings(*argv):
    return settings_from_args(build_parser().parse_args(["run", *argv]))


def test_api_and_cli_resolve_to_the_same_protocol(countries, sim_model):
    cli = cli_settings()
    api = probe_settings()
    assert EngineConfig.from_settings(cli).to_dict() == EngineConfig.from_settings(api).to_dict()
    assert (cli["kg"], cli["model"], cli["out"]) == (api["kg"], api["model"], api["out"]) == \
        ("countries", "default", "runs")
    cfg = EngineConfig.from_settings(api)
    assert (cfg.budget, cfg.batch_size, cfg.method, cfg.sampler, cfg.seed) == (256, 32, "zp-lke", "margin-focus", 0)
    # Every option is recorded, 20 x 19 for ZP-LKE; the design fraction sits among the sampler's.
    assert {k: cfg.probe_options[k] for k in ("num_examples", "num_distractors", "fixed_examples",
                                              "example_seed")} == \
        {"num_examples": 20, "num_distractors": 19, "fixed_examples": False, "example_seed": 0}
    from kgprobe.sampling.margin import MarginFocusSampler
    from kgprobe.settings import RUN_DEFAULTS

    assert cfg.sampler_options == {**_class_defaults(MarginFocusSampler),
                                   "design_fraction": RUN_DEFAULTS["design_fraction"]}
    # The protocols built from the two (same model, same KG) differ in nothing but the date.
    a = build_protocol(EngineConfig.from_settings(cli), countries, sim_model, "default", date="d")
    b = build_protocol(EngineConfig.from_settings(api), countries, sim_model, "default", date="d")
    assert a == b
    # The design: adaptive, no lean target; with a prior, half of its probabilities follow it.
    # The stratum minimums' pacing is recorded (not a setting); the target's control only with a target.
    assert a["design"] == {"name": "adaptive", "tilt": 0.0, "prior_share": 0.5, "lean_target": None,
                           "pacing": "capped", "lean_control": None}
    rows = dict(protocol_rows(a))
    assert rows["design"] == ("adaptive (uniform floor with stratum minimums, lean to edges predicted wrong or "
                              "uncertain); with --prior, 0.5 follows its predicted spread")
    hunt = build_protocol(EngineConfig.from_settings({**api, "lean_target": 0.055}), countries, sim_model, "default",
                          date="d")
    # Every part in one report cell of at most 160 characters.
    text = dict(protocol_rows(hunt))["design"]
    assert "uncertain); --lean-target 0.055; with --prior" in text and len(text) <= 160
    assert (hunt["design"]["pacing"], hunt["design"]["lean_control"]) == ("capped", "realized")
    # A run under the older rules names them: they are not what a new run does.
    older = EngineConfig.from_settings({**api, "lean_target": 0.055, "prior_design": 0.0})
    older.design_pacing, older.lean_control = "early", "projected"
    assert dict(protocol_rows(build_protocol(older, countries, sim_model, "default", date="d")))["design"] == (
        "adaptive (uniform floor with stratum minimums, lean to edges predicted wrong or uncertain); "
        "--lean-target 0.055; stratum minimums paced 'early'; target control 'projected'")
    # An older run file's settings hold none of the keys: it drew uniformly.
    old = EngineConfig.from_settings(api).to_dict()
    del old["design_tilt"], old["prior_design"], old["design"], old["lean_target"]
    assert dict(protocol_rows(build_protocol(old, countries, sim_model, "default", date="d")))["design"] == "uniform"
    tilted = dict(EngineConfig.from_settings(api).to_dict(), design_tilt=0.5, prior_design=0.0, design="uniform")
    assert dict(protocol_rows(build_protocol(tilted, countries, sim_model, "default", date="d")))["design"] == \
        "0.5 leans towards edges predicted wrong"


def test_one_probe_option_leaves_the_others_at_their_defaults():
    cli = cli_settings("--probe-option", "num_examples=10")
    expected = {**cli_settings()["probe_options"], "num_examples": 10}
    assert cli["probe_options"] == expected
    assert cli["probe_options"]["num_distractors"] == 19  # not the class default 99
    assert probe_settings(probe_options={"num_examples": 10})["probe_options"] == expected


def test_hgp_shares_the_option_count_with_zp_lke():
    assert cli_settings("--method", "hgp")["probe_options"] == {"num_distractors": 19, "template_index": None}


def test_probe_option_types_are_checked(tmp_path, capsys):
    with pytest.raises(InputError, match=r"--probe-option num_examples='abc': expected an integer"):
        cli_settings("--probe-option", "num_examples=abc")
    with pytest.raises(InputError, match=r"probe 'zp-lke' has no option 'num_exemples'; its options: .*num_examples"):
        probe_settings(probe_options={"num_exemples": 3})
    with pytest.raises(InputError, match=r"sampler_options epsilon=True: expected a number"):
        probe_settings(sampler="epsilon-greedy", sampler_options={"epsilon": True})
    assert probe_settings(sampler="epsilon-greedy", sampler_options={"epsilon": 1})["sampler_options"] == \
        {"epsilon": 1.0}
    cfg = tmp_path / "c.toml"
    cfg.write_text('method = "zp-lke"\n[probe_options]\nnum_distractors = "many"\n')
    assert main(["run", "--config", str(cfg), "--out", str(tmp_path)]) == 2
    assert "num_distractors='many': expected an integer" in capsys.readouterr().err


def test_gguf_labels():
    assert gguf_label("SmolLM2-135M-Instruct.Q4_1.gguf") == ("SmolLM2-135M-Instruct", "Q4_1")
    assert gguf_label("gemma-3-270m-q4_k_m.gguf") == ("gemma-3-270m", "Q4_K_M")
    assert gguf_label("plain.gguf") == ("plain", None)


def _run(tmp_path, name, countries, sim_model, **kw):
    settings = {**FAST, **kw}
    return kgprobe.probe(countries, sim_model, store=tmp_path / f"{name}.kgrun", **settings)


def test_protocol_is_stored_and_compare_refuses_different_option_counts(tmp_path, countries, sim_model, capsys):
    a = _run(tmp_path, "a", countries, sim_model)
    b = _run(tmp_path, "b", countries, sim_model, probe_options={"num_examples": 5, "num_distractors": 9})
    c = _run(tmp_path, "c", countries, sim_model, seed=6)
    proto = a.protocol
    assert proto["probe_options"] == {**ZP_LKE_DEFAULTS, "num_examples": 5, "num_distractors": 4}
    assert proto["kg"]["name"] == "countries" and len(proto["kg"]["content_hash"]) == 64
    assert (proto["batch_size"], proto["budget"], proto["seed"]) == (16, 32, 5)
    assert proto["model"]["identity"] == sim_model.identity
    assert set(proto["versions"]) == {"kgprobe", "python", "torch", "transformers", "numpy"}
    assert [str(d) for d in protocol_differences(a.protocol, b.protocol)] == ["probe_options.num_distractors: 4 vs 9"]
    assert protocol_differences(a.protocol, c.protocol) == []  # another seed is a replicate
    for r in (a, b, c):
        r.close()
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "a.kgrun"), str(tmp_path / "b.kgrun")]) == 2
    err = capsys.readouterr().err
    assert "did not measure the same thing" in err and "probe_options.num_distractors: 4 vs 9" in err
    assert main(["compare", str(tmp_path / "a.kgrun"), str(tmp_path / "b.kgrun"), "--allow-different"]) == 0
    assert "WARNING: these runs measured different things" in capsys.readouterr().out
    assert main(["compare", str(tmp_path / "a.kgrun"), str(tmp_path / "c.kgrun"), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["protocol_differences"] == [] and [p["seed"] for p in payload["protocols"]] == [5, 6]
    # Comparable runs: no banner, and the seed is listed as what differs besides the protocol.
    assert main(["compare", str(tmp_path / "a.kgrun"), str(tmp_path / "c.kgrun")]) == 0
    text = capsys.readouterr().out
    assert "WARNING" not in text and "what differs between the runs besides the measurement protocol:" in text
    assert re.search(r"\n seed\s+5\s+6 *\n", text)
    # The runs are numbered once in a legend; each table's row is the number alone and on
    # one line at 80 columns: probed edges, win, zero-sense, all-sense, KG accuracy with
    # its interval and the baselines, as the JSON has them.
    assert f"  [1] {payload['runs'][0]}\n" in text and f"  [2] {payload['runs'][1]}\n" in text
    for i, (m, est) in enumerate(zip(payload["metrics"], payload["accuracy_estimates"])):
        row = (rf"\n \[{i + 1}\]\s+{m['probed_edges']}\s+{m['win_rate']:.1%}\s+{m['zero_sense_rate']:.1%}\s+"
               rf"{m['all_sense_rate']:.1%}\s+{est['estimate']:.1%} \[{est['low']:.1%}, {est['high']:.1%}\]\s+"
               r"\d+% / \d+% / – *\n")
        assert re.search(row, text), row
    # η needs edges both runs probed; these two seeds' 31 and 32 edges share none.
    assert payload["common_edges"][0][1] == 0
    assert re.search(r"\n \[1\]\s+–\s+n/a *\n \[2\]\s+n/a\s+– *\n", text)
    # Two runs: the pair is named in the differences' title; more: one table per pair (below).
    assert "accuracy difference [1] − [2], points (95% CI" in text and "A − B" not in text
    # The variance line says which variance the KG's test used and which the predicates'.
    caption = " ".join(text[text.index("variance — "):].split())
    assert re.search(r"\(KG\): \S", caption) and "unpaired (predicates): MOVER from each side's Korn-Graubard" in caption
    assert main(["compare", str(tmp_path / "a.kgrun"), str(tmp_path / "c.kgrun"), str(tmp_path / "b.kgrun"),
                 "--allow-different"]) == 0
    text = capsys.readouterr().out
    # More pairs: one table each, the pair named above it.
    assert "accuracy differences A − B, points (95% CI" in text
    assert re.search(r"\n\[1\] − \[3\] *\n(.*\n){4} KG\s+\S+ \[", text)


def test_report_json_output_and_export(tmp_path, countries, sim_model, capsys):
    run = _run(tmp_path, "a", countries, sim_model)
    probes = run.store.probes()
    run.close()
    assert main(["report", str(tmp_path / "a.kgrun"), "--output", str(tmp_path / "r.json")]) == 0
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["protocol"]["method"] == "zp-lke" and data["protocol"]["probe_options"]["num_distractors"] == 4
    assert main(["export", str(tmp_path / "a.kgrun"), "--samples", str(tmp_path / "s.jsonl")]) == 0
    lines = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    header, samples = lines[0], lines[1:]
    assert header["protocol"] == data["protocol"]
    assert len(samples) == len(probes) == 32  # 2 rounds of 16, one query each
    assert all(s["design"] is True for s in samples)  # the run default: every probe a design draw
    for s, p in zip(samples, probes):
        assert (s["round"], s["pos"], s["edge"], s["verdict"], s["response"]) == \
            (p.round, p.pos, p.edge, p.correct, p.answer)
        t = countries.triple(p.edge)
        assert (s["subject"]["id"], s["predicate"]["id"], s["object"]["id"]) == (t.subject, t.predicate, t.object)
        assert len(s["options"]) == len(s["scores"]) == p.detail["num_options"]
        # The question is the context, the separator's tail, then "[N options]".
        assert p.question.startswith(s["prompt"]) and p.question.endswith(f"[{len(s['options'])} options]")
        # The response is the option with the highest recorded log-probability (no ties here).
        best = int(np.argmax([sc["logprob"] for sc in s["scores"]]))
        assert s["options"][best].strip() == s["response"] == p.answer
        assert s["object"]["label"] in [o.strip() for o in s["options"]]
        assert s["verdict"] == (s["response"] == s["object"]["label"])


def test_in_memory_runs(tmp_path, countries, sim_model):
    from kgprobe.report import write_report

    run = kgprobe.probe(countries, sim_model, store=None, **FAST)
    assert run.path == ":memory:" and run.report_paths is None
    with pytest.raises(InputError, match="this run is in memory"):
        write_report(run)
    paths = write_report(run, tmp_path / "rep")
    assert paths["markdown"].startswith(str(tmp_path / "rep")) and ":memory:" not in paths["markdown"]
    saved = run.save(tmp_path / "kept")
    assert saved == str(tmp_path / "kept.kgrun")
    with pytest.raises(InputError, match="already exists"):
        run.save(tmp_path / "kept.kgrun")
    with open_run(saved) as copy:
        assert copy.protocol == run.protocol and copy.rounds_played == run.rounds_played == 2
        assert [p.answer for p in copy.store.probes()] == [p.answer for p in run.store.probes()]
    with pytest.raises(InputError, match="run.save"):
        kgprobe.resume(":memory:")
    # A target inside a path that is a file cannot be written: a StoreError naming the
    # target (this raised NameError before StoreError was imported where save() lives).
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(StoreError, match=r"cannot save the run to .*a-file/kept\.kgrun"):
        run.save(tmp_path / "a-file" / "kept")


def test_default_store_and_report(tmp_path, countries, sim_model, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = kgprobe.probe(countries, sim_model, **{**FAST, "report": True})
    assert run.path.startswith("runs/") and run.path.endswith(".kgrun")
    assert run.report_paths["html"].endswith(".html")
    assert "What exactly was measured" in open(run.report_paths["markdown"]).read()
    run.close()


def test_public_names():
    assert {"probe", "resume", "open_run", "Run"} <= set(dir(kgprobe))


class _Loaded:
    """What describe_model reads from a loaded backend: identity, name, dtype, device."""

    def __init__(self, identity, name, dtype=None, device=None):
        self.identity, self.name, self.dtype, self.device = identity, name, dtype, device


def test_model_description_says_what_the_weights_are():
    from kgprobe.protocol import describe_model

    default = _Loaded("transformers:smollm2-135m-instruct@b179c9523d0e6a0f|dtype=float32|bos=0",
                      "smollm2-135m-instruct@b179c9523d0e6a0f", "torch.float32", "cpu")
    for spec in ("default", "smollm2-135m-instruct", ""):  # by spec, or by the identity of a model object
        d = describe_model(default, spec)
        assert (d["label"], d["weights_format"], d["quantization"], d["dtype"], d["device"], d["backend"]) == (
            "SmolLM2-135M-Instruct (GGUF Q4_1, dequantized)", "GGUF Q4_1, dequantized to float32",
            "Q4_1 (dequantized)", "float32", "cpu", "transformers")
    hub = describe_model(_Loaded("transformers:HuggingFaceTB/SmolLM2-135M|dtype=bfloat16|bos=0",
                                 "HuggingFaceTB/SmolLM2-135M", "torch.bfloat16", "cuda:0"), "HuggingFaceTB/SmolLM2-135M")
    assert (hub["label"], hub["quantization"], hub["dtype"], hub["device"]) == (
        "HuggingFaceTB/SmolLM2-135M", None, "bfloat16", "cuda:0")
    api = describe_model(_Loaded("openai:smollm2@http://h:8000/v1|bos=server", "smollm2"), "openai:smollm2@http://h:8000/v1")
    assert (api["backend"], api["device"], api["weights_format"]) == ("openai", "server", "served (unknown to the client)")


def test_a_protocol_stored_before_the_design_was_named_takes_it_from_the_settings(tmp_path, countries, sim_model):
    # Run files written between the adaptive default and the design's name in the protocol
    # store {"tilt", "prior_share"} only; their settings say which design drew.
    from kgprobe.store import RunStore

    run = _run(tmp_path, "old", countries, sim_model)
    proto = run.protocol
    run.close()
    proto["design"] = {"tilt": 0.0, "prior_share": 0.5}
    store = RunStore.open(tmp_path / "old.kgrun", writable=True)
    store.set_meta("protocol", json.dumps(proto))
    store.close()
    reopened = open_run(tmp_path / "old.kgrun")
    assert reopened.protocol["design"] == {"tilt": 0.0, "prior_share": 0.5, "name": "adaptive", "lean_target": None,
                                           "pacing": "capped", "lean_control": None}
    assert dict(protocol_rows(reopened.protocol))["design"].startswith("adaptive (uniform floor")
    reopened.close()


def test_compare_lists_the_older_lean_control_of_a_run_file_that_predates_it(tmp_path, countries, sim_model, capsys):
    # A lean-target run file written before the target's control was recorded: neither its
    # settings nor its protocol hold lean_control; it was played with "projected" (and
    # resumes with it). compare keeps the runs comparable (the design is context, not
    # measurement) and lists the design of each, the rule that differs among them.
    from kgprobe.store import RunStore

    for name in ("old", "new"):
        _run(tmp_path, name, countries, sim_model, lean_target=0.055).close()
    store = RunStore.open(tmp_path / "old.kgrun", writable=True)
    config, proto = store.config, json.loads(store.meta("protocol"))
    del config["lean_control"], proto["design"]["lean_control"]
    store.set_meta("config", json.dumps(config))
    store.set_meta("protocol", json.dumps(proto))
    store.close()
    old, new = open_run(tmp_path / "old.kgrun"), open_run(tmp_path / "new.kgrun")
    assert (old.protocol["design"]["lean_control"], new.protocol["design"]["lean_control"]) == ("projected", "realized")
    assert protocol_differences(old.protocol, new.protocol) == []
    assert dict(protocol_rows(old.protocol))["design"].endswith("--lean-target 0.055; target control 'projected'; "
                                                               "with --prior, 0.5 follows its predicted spread")
    old.close(), new.close()
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "old.kgrun"), str(tmp_path / "new.kgrun"), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert [p["design"]["lean_control"] for p in payload["protocols"]] == ["projected", "realized"]
    assert main(["compare", str(tmp_path / "old.kgrun"), str(tmp_path / "new.kgrun")]) == 0
    text = capsys.readouterr().out
    assert re.search(r"\n design.lean_control\s+projected\s+realized *\n", text)
