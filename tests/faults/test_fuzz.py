"""Property-based fuzzing (hypothesis) of the KG file parsers and the config loader:
whatever the bytes, the answer is a graph / settings, or a clear InputError, never
another exception."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgprobe.run_spec import BY_NAME, check_settings
from kgprobe.errors import InputError, KgprobeError

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
triple_keys = st.sampled_from(["subject", "predicate", "object", "active", "type", "label", "id", "format",
                               "kgprobe_kg", "version", "entities", "triples", "predicates"])


def _load(tmp_path, name: str, data: bytes):
    from kgprobe.kg.formats import load_kg

    path = tmp_path / name
    path.write_bytes(data)
    try:
        kg = load_kg(path)
    except InputError as exc:
        assert str(exc)
        return None
    assert kg.num_edges >= 0
    return kg


@FUZZ
@given(data=st.binary(max_size=400))
def test_random_bytes_as_a_kg_file(tmp_path, data):
    _load(tmp_path, "kg.jsonl", data)


@FUZZ
@given(records=st.lists(st.dictionaries(triple_keys, json_values, max_size=5), max_size=6))
def test_json_lines_of_the_wrong_shape(tmp_path, records):
    _load(tmp_path, "kg.jsonl", "\n".join(json.dumps(r) for r in records).encode())


@FUZZ
@given(cut=st.integers(0, 10_000), flip=st.integers(0, 10_000))
def test_a_damaged_native_kg_file(tmp_path, cut, flip):
    from kgprobe.kg.formats import save_kg
    from kgprobe.sources.embedded import load_embedded_kg

    global _NATIVE
    if "_NATIVE" not in globals():
        save_kg(load_embedded_kg("countries"), tmp_path / "native.jsonl")
        _NATIVE = (tmp_path / "native.jsonl").read_bytes()
    data = bytearray(_NATIVE[: max(1, cut % len(_NATIVE))])
    data[flip % len(data)] ^= 0x20
    _load(tmp_path, "damaged.jsonl", bytes(data))


@FUZZ
@given(mapping=st.dictionaries(st.sampled_from(sorted(BY_NAME) + ["metod", "seed-x"]), json_values, max_size=6))
def test_check_settings_never_raises_anything_but_input_error(mapping):
    try:
        check_settings(mapping, "fuzz")
    except InputError as exc:
        assert str(exc).startswith("fuzz: ")


@FUZZ
@given(text=st.text(st.characters(blacklist_categories=("Cs",)), max_size=200))
def test_the_config_loader_on_arbitrary_text(tmp_path, text):
    from kgprobe.commands.run import load_config_file

    path = tmp_path / "c.toml"
    path.write_text(text, encoding="utf-8")
    try:
        cfg = load_config_file(str(path))
    except KgprobeError as exc:
        assert exc.exit_code == 2
    else:
        check_settings(cfg, "again")  # what the loader accepts, the schema accepts
