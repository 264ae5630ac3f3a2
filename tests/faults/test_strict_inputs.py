"""Defects 3 (SPARQL injection through --lang), 4 (config types unchecked) and 7 (raw
HTML from labels in Markdown reports)."""

from __future__ import annotations

import pytest

from kgprobe.cli import main
from kgprobe.run_spec import check_settings
from kgprobe.errors import InputError
from kgprobe.kg.build import build_kg
from kgprobe.sources.validate import is_language_tag


@pytest.mark.parametrize("tag", ["en", "de", "pt-BR", "zh-Hans", "zh-Hant-TW", "sr-Latn-RS", "de-CH-1996",
                                 "es-419", "x-kgprobe", "en-a-bbb-x-a-ccc", "yue", "zh-yue-HK"])
def test_well_formed_language_tags(tag):
    assert is_language_tag(tag)


@pytest.mark.parametrize("tag", ['en") || true || ("', "en } } SELECT", "en\n#", "", "e", "en_US", "english1",
                                 "en-", "-en", "en--US", "en US", "toolonglanguage", "12"])
def test_malformed_language_tags(tag):
    assert not is_language_tag(tag)


@pytest.mark.parametrize("lang", ['en") || true || ("', "en } }", "en\\n"])
def test_lang_injection_is_refused_before_any_query(fake_sparql, lang):
    before = fake_sparql.count
    with pytest.raises(InputError, match="is not a language tag"):
        build_kg(fake_sparql.url("rows"), ["Q142"], hops=1, lang=lang)
    assert fake_sparql.count == before


def test_lang_injection_through_the_cli_is_exit_2(capsys):
    assert main(["build", "--seeds", "France", "--lang", 'en") || true || ("', "-o", "/nonexistent/x.jsonl"]) == 2
    assert "is not a language tag (BCP 47" in capsys.readouterr().err


def test_an_iri_seed_with_query_syntax_is_refused(fake_sparql):
    before = fake_sparql.count
    with pytest.raises(InputError, match="looks like an IRI but is not one SPARQL can write"):
        build_kg(fake_sparql.url("rows"), ["<http://x> } ; DROP ALL ; <y>"], hops=1)
    assert fake_sparql.count == before


@pytest.mark.parametrize("settings, message", [
    ({"seed": "x"}, "setting 'seed' must be an integer, not the string 'x'"),
    ({"seed": True}, "setting 'seed' must be an integer, not the boolean true (true/false is not a number)"),
    ({"convergence_tolerance": "a"}, "setting 'convergence_tolerance' must be a number, not the string 'a'"),
    ({"convergence_tolerance": 0.0}, "setting 'convergence_tolerance' must be a number > 0, not 0.0"),
    ({"batch_size": 0}, "setting 'batch_size' must be an integer >= 1, not 0"),
    ({"budget": 2.0}, "setting 'budget' must be an integer, not the number 2.0 (write 2 without a decimal point)"),
    ({"design_fraction": 1.5}, "setting 'design_fraction' must be a number >= 0 and <= 1, not 1.5"),
    ({"propagation_weight": float("nan")}, "setting 'propagation_weight' must be a number, not the number nan"),
    ({"stop_on_convergence": 1}, "setting 'stop_on_convergence' must be true or false, not the integer 1"),
    ({"seeds": ["Q1", 2]}, "setting 'seeds' must be a list of strings, not a list"),
    ({"probe_options": [1]}, "setting 'probe_options' must be a table (key = value pairs), not a list"),
    ({"metod": "hgp"}, "unknown setting(s) metod"),
])
def test_check_settings_names_the_key_and_the_type(settings, message):
    with pytest.raises(InputError) as info:
        check_settings(settings, "config file c.toml")
    assert str(info.value).startswith("config file c.toml: ") and message in str(info.value)


def test_check_settings_accepts_good_values_and_known_extras():
    check_settings({"seed": 3, "propagation_weight": 1, "max_rounds": None, "budget": 10, "round-timeout": 2.5,
                    "device": "cpu"}, "x", known=["device"])


@pytest.mark.parametrize("toml", ['seed = "x"\n', 'convergence_tolerance = "a"\n', "seed = true\n"])
def test_a_bad_config_value_is_exit_2_before_any_run_file(tmp_path, capsys, toml):
    cfg = tmp_path / "c.toml"
    cfg.write_text(toml)
    out = tmp_path / "runs"
    assert main(["run", "--config", str(cfg), "--out", str(out), "--quiet", "--no-report"]) == 2
    err = capsys.readouterr().err
    assert f"config file {cfg}: setting" in err
    assert not out.exists() or not list(out.iterdir())


def test_markdown_report_escapes_labels():
    from kgprobe.report import _md_cell, render_markdown

    assert _md_cell("<script>alert(1)</script>") == "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert _md_cell("a | b *c* [d](e) `f` _g_ ~h~ \\") == "a \\| b \\*c\\* \\[d\\](e) \\`f\\` \\_g\\_ \\~h\\~ \\\\"
    data = {"model": "<b>m</b>", "kg": {"name": "<img src=x onerror=alert(1)>"}, "run": "r.kgrun"}
    import kgprobe.report as report

    original = report._sections
    report._sections = lambda d: [("t", "Table", ["label"], [["<script>x</script>"]], None)]
    try:
        text = render_markdown(data, {})
    finally:
        report._sections = original
    assert "<" not in text.replace("&lt;", "")
    assert "| &lt;script&gt;x&lt;/script&gt; |" in text
