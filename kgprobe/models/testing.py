"""A tiny random transformers model built on the fly, for fast tests (no weight files).

Its tokenizer is the default model's real one (SmolLM2's BPE), so tokenization and BOS
handling are exercised on realistic text; the network is a 2-layer Llama with random
weights, which runs in milliseconds.
"""

from __future__ import annotations

import functools

from kgprobe.models.default_model import (
    DEFAULT_MODEL_NAME,
    converted_dir,
    copy_status,
    find_default_gguf,
)


@functools.lru_cache(maxsize=1)
def default_tokenizer():
    """The default model's tokenizer: from the converted copy if ready, else from the GGUF."""
    from transformers import AutoTokenizer

    copy = converted_dir(DEFAULT_MODEL_NAME)
    if copy_status(copy) == "ready":
        return AutoTokenizer.from_pretrained(str(copy))
    gguf = find_default_gguf()
    return AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)


def tiny_model(
    *,
    seed: int = 0,
    max_position_embeddings: int = 256,
    add_bos: bool = False,
    sliding_window: int | None = None,
    hidden_size: int = 32,
    intermediate_size: int = 64,
    device: str = "cpu",
    **kwargs,
):
    """A :class:`~kgprobe.models.hf_backend.TransformersModel` around a random 2-layer Llama.

    Same ``seed`` ⇒ same weights ⇒ same scores. ``max_position_embeddings`` is the
    window, kept small so too-long-context errors are cheap to provoke. With
    ``sliding_window`` the network is a 2-layer Gemma-3 instead (one sliding-window layer
    with that window, one full-attention layer), the architecture of the optional
    Gemma-3-270m. It runs on the CPU unless ``device`` says otherwise, so the values tests
    pin hold on a machine with a GPU too (``auto`` there would mean CUDA in bfloat16).
    """
    import torch
    import transformers

    from kgprobe.models.hf_backend import TransformersModel

    tokenizer = default_tokenizer()
    common = dict(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_position_embeddings,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    if sliding_window is None:
        config, model_class, arch = transformers.LlamaConfig(**common), transformers.LlamaForCausalLM, "llama"
        if hidden_size != 32:
            arch = f"llama-width{hidden_size}"
    else:
        config = transformers.Gemma3TextConfig(
            **common,
            head_dim=8,
            sliding_window=sliding_window,
            layer_types=["sliding_attention", "full_attention"],
        )
        model_class, arch = transformers.Gemma3ForCausalLM, f"gemma3-window{sliding_window}"
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        model = model_class(config)
    finally:
        torch.random.set_rng_state(generator_state)
    return TransformersModel.from_components(
        model, tokenizer, label=f"tiny-random-{arch}-seed{seed}", add_bos=add_bos, device=device, **kwargs
    )


def tiny_random_model(**kwargs):
    """The ``tiny-random`` model spec: a random 2-layer Llama of width 64 (4 heads, 2 KV
    heads, MLP 256) with the default tokenizer and a 4,096-token window, seed 0. Its
    cost per token is tiny next to a real model's, so it measures kgprobe's own work."""
    kwargs.setdefault("max_position_embeddings", 4096)
    kwargs.setdefault("device", "auto")  # a spec like any other: the GPU when there is one
    return tiny_model(hidden_size=64, intermediate_size=256, **kwargs)
