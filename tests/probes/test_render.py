"""Rendering: exact strings on hand-built KGs, and the invariants every rendering keeps."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from kgprobe.errors import InputError
from kgprobe.kg.graph import Entity, KnowledgeGraph, Predicate, Triple
from kgprobe.probes import PROBES, make_probe
from kgprobe.probes.common import ProbeWarning
from kgprobe.probes.kglens import KGLensProbe


def rng(seed=0):
    return np.random.default_rng(seed)


# -- ZP-LKE ------------------------------------------------------------------------------------


def test_zp_lke_with_one_usable_example_renders_exactly(tiny_kg):
    # Probing edge 0 (France capital Paris): the only other P36 fact is Germany Berlin, so
    # the context is fixed whatever the seed; the only distractor is Berlin (2 options).
    probe = make_probe("zp-lke", num_examples=50)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        task = probe.render(tiny_kg, 0, rng())
    messages = sorted(str(w.message) for w in caught)
    assert len(messages) == 2
    assert "only 1 other facts can serve as examples" in messages[0] and "only 1 wrong options" in messages[1]
    assert [r.context for r in task.score_requests] == ["Germany\tBerlin\nFrance\t"] * 2
    assert sorted(r.continuation for r in task.score_requests) == ["Berlin", "Paris"]
    assert task.payload["options"][task.payload["gold_index"]] == "Paris"
    assert task.payload["num_examples"] == 1
    assert all(r.edge == 0 for r in task.score_requests)
    assert probe.chance_level(tiny_kg, 0) == 0.5


def test_zp_lke_labels_with_commas_colons_quotes_and_whitespace_stay_one_field_each():
    # Labels may contain ", ", ":" and quotes (the paper's ", "-joined text would be
    # ambiguous there); tabs/newlines/space runs in labels are collapsed to one space when
    # the Entity is built, so the only tab and newline characters are the separators.
    entities = [
        Entity("Q1", "Washington,\tD.C."),
        Entity("Q2", 'Côte d\'Ivoire "Ivory\n Coast"'),
        Entity("Q3", "Re: public"),
        Entity("Q10", "A, B"),
        Entity("Q20", 'say "hi":  yes'),
        Entity("Q30", "x:y"),
    ]
    triples = [Triple("Q1", "P1", "Q10"), Triple("Q2", "P1", "Q20"), Triple("Q3", "P1", "Q30")]
    kg = KnowledgeGraph(entities, [Predicate("P1", "rel\tlabel")], triples)
    assert kg.entity("Q1").label == "Washington, D.C." and kg.entity("Q20").label == 'say "hi": yes'
    task = make_probe("zp-lke", num_examples=2, num_distractors=2).render(kg, 2, rng(0))
    context = task.score_requests[0].context
    lines = context.split("\n")
    assert lines[-1] == "Re: public\t"
    assert sorted(lines[:-1]) == sorted(["Washington, D.C.\tA, B", 'Côte d\'Ivoire "Ivory Coast"\tsay "hi": yes'])
    assert context.count("\t") == 3 and context.count("\n") == 2
    assert sorted(r.continuation for r in task.score_requests) == ["A, B", 'say "hi": yes', "x:y"]
    assert task.payload["options"][task.payload["gold_index"]] == "x:y"


def test_zp_lke_separators_are_parameters(tiny_kg):
    # " : " between subject and object (the released code's choice): context keeps " :",
    # the continuation starts with the trailing space.
    probe = make_probe("zp-lke", subject_object_sep=" : ", pair_sep=" , ")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ProbeWarning)
        task = probe.render(tiny_kg, 1, rng())
    assert task.score_requests[0].context == "France : Paris , Germany :"
    assert sorted(r.continuation for r in task.score_requests) == [" Berlin", " Paris"]


def test_zp_lke_examples_exclude_the_probed_fact_and_its_subject(capitals_kg):
    probe = make_probe("zp-lke", num_examples=5, num_distractors=3)
    for seed in range(50):
        edge = seed % 30
        task = probe.render(capitals_kg, edge, rng(seed))
        context = task.score_requests[0].context
        pairs = context.split("\n")
        assert len(pairs) == 6 and pairs[-1] == f"Country{edge}\t"
        assert f"Country{edge}\t" not in "\n".join(pairs[:-1])
        # every example is a true fact of the predicate
        for pair in pairs[:-1]:
            c, k = pair.split("\t")
            assert c.replace("Country", "") == k.replace("City", "")
        options = task.payload["options"]
        assert len(options) == 4 and options[task.payload["gold_index"]] == f"City{edge}"
        assert len(set(options)) == 4


def test_zp_lke_draws_fresh_examples_per_probe_but_is_seeded(capitals_kg):
    probe = make_probe("zp-lke", num_examples=5, num_distractors=3)
    a = probe.render(capitals_kg, 0, rng(1)).score_requests[0].context
    b = probe.render(capitals_kg, 0, rng(1)).score_requests[0].context
    stream = rng(1)
    c = probe.render(capitals_kg, 0, stream).score_requests[0].context
    d = probe.render(capitals_kg, 0, stream).score_requests[0].context
    assert a == b == c and c != d


def test_zp_lke_fixed_examples_share_the_prefix_across_facts(capitals_kg):
    probe = make_probe("zp-lke", num_examples=5, num_distractors=3, fixed_examples=True, example_seed=3)
    c1 = probe.render(capitals_kg, 0, rng(1)).score_requests[0].context
    c2 = probe.render(capitals_kg, 1, rng(2)).score_requests[0].context
    prefix1, prefix2 = c1.rsplit("\n", 1)[0], c2.rsplit("\n", 1)[0]
    if "Country0\t" not in prefix2 and "Country1\t" not in prefix1:
        assert prefix1 == prefix2
    assert c1.endswith("\nCountry0\t") and c2.endswith("\nCountry1\t")


def test_distractors_exclude_every_true_object(tiny_kg):
    # Switzerland (edge 4) has four true languages; P37's candidates are those four plus
    # nothing else, so no distractor is left: one option, chance level 1.
    probe = make_probe("zp-lke", num_examples=2)
    with pytest.warns(ProbeWarning, match="only 0 wrong options"):
        task = probe.render(tiny_kg, 4, rng())
    assert task.payload["options"] == ["German"]
    assert probe.chance_level(tiny_kg, 4) == 1.0
    # Germany (edge 7): C − T = {French, Italian, Romansh}
    for seed in range(10):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ProbeWarning)
            options = probe.render(tiny_kg, 7, rng(seed)).payload["options"]
        assert sorted(options) == ["French", "German", "Italian", "Romansh"]
    assert probe.chance_level(tiny_kg, 7) == 0.25


def test_fewer_distractors_than_k_changes_chance_level(capitals_kg):
    probe = make_probe("zp-lke", num_examples=3, num_distractors=99)
    with pytest.warns(ProbeWarning, match="only 29 wrong options"):
        task = probe.render(capitals_kg, 0, rng())
    assert len(task.payload["options"]) == 30
    assert probe.chance_level(capitals_kg, 0) == pytest.approx(1 / 30)


def test_zp_lke_generation_request(tiny_kg):
    probe = make_probe("zp-lke-gen", max_tokens=7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ProbeWarning)
        task = probe.render(tiny_kg, 0, rng())
    (req,) = task.generate_requests
    assert req.prompt == "Germany\tBerlin\nFrance\t" and req.max_tokens == 7 and req.stop == ("\n",)
    assert task.payload["gold"] == ["Paris"]
    # the first line is the answer; later pairs the model invents do not count
    assert probe.verify(tiny_kg, task, [], ["Paris\nSpain\tMadrid"]).correct
    assert not probe.verify(tiny_kg, task, [], ["Lyon\nItaly\tParis"]).correct


# -- HGP ---------------------------------------------------------------------------------------


def test_hgp_uses_the_predicate_template(tiny_kg):
    probe = make_probe("hgp", template_index=0)
    with pytest.warns(ProbeWarning, match="only 1 wrong options"):
        task = probe.render(tiny_kg, 0, rng())
    assert {r.context for r in task.score_requests} == {"The capital of France is"}
    assert sorted(r.continuation for r in task.score_requests) == [" Berlin", " Paris"]
    gen = make_probe("hgp-gen", template_index=2).render(tiny_kg, 1, rng())
    assert gen.generate_requests[0].prompt == "Germany's capital is"


@pytest.mark.slow  # loads the 80k-edge geo KG (~10 s)
def test_hgp_has_templates_for_every_predicate_of_the_embedded_kgs():
    from kgprobe.probes.templates import has_templates
    from kgprobe.sources.embedded import load_embedded_kg

    for name in ("countries", "geo"):
        kg = load_embedded_kg(name)
        missing = [p for p in kg.predicates if not has_templates(p)]
        assert missing == [], f"{name}: no templates for {missing}"


def test_unknown_predicate_gets_generic_templates():
    kg = KnowledgeGraph(
        [Entity("a", "Alpha"), Entity("b", "Beta")], [Predicate("P9999", "twinned with")], [Triple("a", "P9999", "b")]
    )
    with pytest.warns(ProbeWarning, match="only 0 wrong options"):
        task = make_probe("hgp", template_index=0).render(kg, 0, rng())
    # the grammar reads "twinned with" as participle + preposition (no quoted label)
    assert task.score_requests[0].context == "Alpha is twinned with"


# -- KGLens --------------------------------------------------------------------------------------


def test_yes_no_question_text_and_polarity(tiny_kg):
    probe = make_probe("yes-no")
    questions = []
    for attempt in range(4):
        task = probe.render_attempt(tiny_kg, 0, rng(attempt), attempt)
        q = task.payload
        assert q["type"] == "yes_no" and q["phrasing"]["attempt"] == attempt
        (req,) = task.generate_requests
        assert req.chat and req.prompt.endswith(f"Question: {task.question}\nAnswer:")
        questions.append((task.question, q["expected"]))
    # France has one alias, so it always appears as "France (also known as French Republic)";
    # true and false objects alternate, templates rotate: four probes, four distinct questions
    # (the start: crc32("Q142\tP36\tQ90") is even, so the first probe asks the true object)
    assert questions == [
        ("Is Paris the capital of France (also known as French Republic)?", True),
        ("Is Berlin the capital of France (also known as French Republic)?", False),
        ("Is the capital of France (also known as French Republic) Paris?", True),
        ("Is the capital of France (also known as French Republic) Berlin?", False),
    ]
    # 2 templates × 1 subject form × (1 true + 1 wrong object): a fifth probe repeats the first
    fifth = probe.render_attempt(tiny_kg, 0, rng(), 4)
    assert fifth.question == questions[0][0] and fifth.payload["phrasing"]["repeated"]
    assert probe.phrasing_count(tiny_kg, 0, "yes_no") == 4


def test_first_yes_no_polarity_is_balanced_over_edges(capitals_kg):
    # the start of the alternation is fixed per edge by its triple: over 30 edges, both
    # polarities occur (crc32 of the 30 triples: 13 even = true first, 17 odd = false first)
    firsts = [make_probe("yes-no").render(capitals_kg, j, rng()).payload["expected"] for j in range(30)]
    assert sum(firsts) == 13


def test_yes_no_without_negatives_asks_the_true_object(tiny_kg):
    probe = make_probe("easy")
    for seed in range(20):
        task = probe.render(tiny_kg, 5, rng(seed))  # Switzerland Italian: C − T is empty
        assert task.payload["expected"] is True and "Italian" in task.question


def test_hard_mode_mixes_wh_and_yes_no(tiny_kg):
    probe = make_probe("hard")
    kinds = [probe.render(tiny_kg, 0, rng(seed)).payload["type"] for seed in range(400)]
    assert 150 <= kinds.count("wh") <= 250
    assert probe.chance_level(tiny_kg, 0) == 0.25
    assert make_probe("easy").chance_level(tiny_kg, 0) == 0.5
    assert make_probe("wh").chance_level(tiny_kg, 0) == 0.0


def test_wh_only_below_out_degree_ten():
    entities = [Entity("s", "Hub")] + [Entity(f"o{i}", f"Neighbour{i}") for i in range(11)]
    entities.append(Entity("t", "Other"))
    triples = [Triple("s", "P47", f"o{i}") for i in range(10)] + [Triple("t", "P47", "o10")]
    kg = KnowledgeGraph(entities, [Predicate("P47", "shares border with")], triples)
    probe = make_probe("wh")
    assert probe.render(kg, 0, rng()).payload["type"] == "yes_no"  # out-degree 10: yes/no
    task = probe.render(kg, 10, rng())  # out-degree 1: wh
    assert task.payload["type"] == "wh" and task.payload["gold"] == ["Neighbour10"]
    assert probe.chance_level(kg, 0) == 0.5 and probe.chance_level(kg, 10) == 0.0


def test_wh_gold_lists_every_true_object_and_alias(tiny_kg):
    task = make_probe("wh").render(tiny_kg, 3, rng())
    assert sorted(task.payload["gold"]) == ["French", "French language", "German", "Italian", "Romansh"]
    assert "Swiss Confederation" in task.question


def test_yes_no_logprob_requests(tiny_kg):
    task = make_probe("yes-no-logprob").render(tiny_kg, 0, rng(3))
    assert [r.continuation for r in task.score_requests] == [" Yes", " No"]
    assert task.score_requests[0].context == task.score_requests[1].context


# -- bad input -------------------------------------------------------------------------------------


def test_entity_without_label_is_reported_or_left_out():
    entities = [
        Entity("Q1", "Q1"),  # Wikidata returns the id as label when there is none
        Entity("Q2", "", ("Second",)),
        Entity("Q3", "Third"),
        Entity("Q10", "Ten"),
        Entity("Q20", "Twenty"),
        Entity("Q30", "Q30"),
    ]
    triples = [Triple("Q1", "P1", "Q10"), Triple("Q2", "P1", "Q20"), Triple("Q3", "P1", "Q30"), Triple("Q3", "P1", "Q10")]
    kg = KnowledgeGraph(entities, [Predicate("P1", "rel")], triples)
    probe = make_probe("zp-lke", num_examples=5)
    with pytest.raises(InputError, match="subject 'Q1' has no label"):
        probe.render(kg, 0, rng())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ProbeWarning)
        task = probe.render(kg, 1, rng())
    # the alias stands in for the empty label; Q1's and Q30's facts cannot be examples
    assert task.score_requests[0].context == "Third\tTen\nSecond\t"
    # Q30 cannot be an option, Ten is the only distractor
    assert sorted(task.payload["options"]) == ["Ten", "Twenty"]
    with pytest.raises(InputError, match="object 'Q30'"):
        make_probe("yes-no").render(kg, 2, rng())


def test_labels_in_another_script_and_literals():
    entities = [
        Entity("Q17", "日本", ("Japan",)),
        Entity("Q159", "Россия", ("Russia",)),
        Entity("t1", "東京"),
        Entity("t2", "Москва"),
        Entity('"+1990-05-01T00:00:00Z"', "1990-05-01", is_literal=True),
        Entity('"1991-12-25"', "1991-12-25", is_literal=True),
    ]
    triples = [
        Triple("Q17", "P36", "t1"),
        Triple("Q159", "P36", "t2"),
        Triple("Q17", "P571", '"+1990-05-01T00:00:00Z"'),
        Triple("Q159", "P571", '"1991-12-25"'),
    ]
    kg = KnowledgeGraph(entities, [Predicate("P36", "capital"), Predicate("P571", "inception")], triples)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ProbeWarning)
        task = make_probe("zp-lke").render(kg, 0, rng())
    assert task.score_requests[0].context == "Россия\tМосква\n日本\t"
    wh = make_probe("wh").render(kg, 2, rng())
    assert "日本 (also known as Japan)" in wh.question
    assert make_probe("wh").verify(kg, wh, [], ["It was founded on May 1st, 1990."]).correct
    assert not make_probe("wh").verify(kg, wh, [], ["It was founded on 25 December 1991."]).correct
    wh_city = make_probe("wh").render(kg, 0, rng())
    assert make_probe("wh").verify(kg, wh_city, [], ["首都は東京です。"]).correct


def test_make_probe_names_and_errors():
    assert set(PROBES) == {"zp-lke", "zp-lke-gen", "hgp", "hgp-gen", "yes-no", "yes-no-logprob", "wh", "easy", "hard"}
    assert isinstance(make_probe("hard"), KGLensProbe) and make_probe("hard").mode == "hard"
    with pytest.raises(InputError, match="unknown probe method 'zp'.*zp-lke, zp-lke-gen"):
        make_probe("zp")
    with pytest.raises(InputError, match="num_distractors must be >= 0"):
        make_probe("zp-lke", num_distractors=-1)
    with pytest.raises(InputError, match="probe 'hgp'"):
        make_probe("hgp", bogus=1)
