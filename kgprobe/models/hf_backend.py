"""transformers backend: loading, devices and dtypes, batch sizes; scoring and generation
are mixed in from their own modules.

Scoring is :mod:`kgprobe.models.hf_scoring` (shared-prefix packing), generation
:mod:`kgprobe.models.hf_generation`; this module loads the model and sizes its batches.

Tokenization and BOS
--------------------
Each distinct context is encoded once and all continuations in one batched call, with
exactly the ids of tokenizing context and continuation together
(:class:`~kgprobe.models.tokens.BatchEncoder`). Context and continuation are tokenized together; the continuation's tokens are those
whose character span ends after the context (found with offset mappings). A token that
straddles the boundary is counted as continuation. BOS is added by this backend, never
by the tokenizer: ``add_bos=None`` means "whatever the tokenizer does by default", read
once at load time and fixed in ``identity``. With no BOS and an empty context, the
first continuation token is conditioned on the EOS token (the lm-evaluation-harness
convention), so it still gets a log-probability.

Too-long inputs are refused
---------------------------
A sequence longer than the model window (``max_length``, default the model's
``max_position_embeddings``) raises :class:`~kgprobe.errors.InputError`. Truncating the
left of a zero-prompt context would silently drop examples and change what is measured,
so kgprobe refuses and says how to fix it (fewer examples, shorter prompts).
"""

from __future__ import annotations

from pathlib import Path

from kgprobe.errors import InputError, ModelError
from kgprobe.models.base import LanguageModel
from kgprobe.models.devices import resolve_device
from kgprobe.models.hf_generation import Generation
from kgprobe.models.hf_scoring import (  # noqa: F401  (cache_tensors, make_cache, SLICE: re-exported)
    SLICE,
    PackedScoring,
    cache_tensors,
    make_cache,
)
from kgprobe.models.tokens import TokenizedBackend, start_token

_DTYPES = {"float32": "float32", "fp32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16",
           "float16": "float16", "fp16": "float16"}


def _resolve_dtype(dtype, device):
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype in (None, "auto"):
        # float32 on CPU: bfloat16 matmuls there are slow and less exact. bfloat16 on a GPU
        # for the memory of large models (half of float32's). For the models measured on
        # an H200 (135M and 1.5B, docs/throughput.md) float32 was the faster there, and
        # bfloat16 moves log-probs by up to ~1 nat, so exactness checks and recordings
        # ask for dtype="float32" explicitly.
        return torch.float32 if device.type == "cpu" else torch.bfloat16
    name = _DTYPES.get(str(dtype).lower())
    if name is None:
        raise InputError(f"unknown dtype {dtype!r}; use one of float32, bfloat16, float16, auto.")
    return getattr(torch, name)


def dtype_kwarg(dtype) -> dict:
    """``from_pretrained`` keyword for the weight dtype: ``dtype`` since transformers 4.56,
    ``torch_dtype`` before."""
    import transformers

    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    return {"dtype": dtype} if (major, minor) >= (4, 56) else {"torch_dtype": dtype}


class _no_progress_bars:
    """Hide transformers' per-load "Loading weights" bar: loading a local copy takes a
    second, and the engine and the API leave the terminal to their caller."""

    def __enter__(self):
        from transformers.utils import logging

        self._was_enabled = logging.is_progress_bar_enabled()
        logging.disable_progress_bar()

    def __exit__(self, *exc):
        from transformers.utils import logging

        if self._was_enabled:
            logging.enable_progress_bar()


class TransformersModel(PackedScoring, Generation, TokenizedBackend, LanguageModel):
    """A causal LM from a local directory or hub id, run with transformers.

    Args:
        path_or_id: a model directory (config + weights + tokenizer) or a hub id.
        device: ``"auto"`` (a CUDA GPU when there is one, else the CPU), ``"cpu"``,
            ``"cuda"`` or ``"cuda:N"`` (:mod:`kgprobe.models.devices`).
        dtype: ``"float32"``, ``"bfloat16"``, ``"float16"`` or ``"auto"`` (float32 on CPU,
            bfloat16 on a GPU).
        batch_size: maximum rows per forward pass (None: chosen for the device, see
            :meth:`_auto_batching`).
        max_length: the model window in tokens; longer requests are refused.
        add_bos: prepend BOS (True), never (False), or the tokenizer's default (None).
        label: the model's name in ``identity`` (default: the resolved path or id).
        share_prefix: use shared-prefix scoring (False: every sequence on its own).
        batch_tokens: token budget of one forward pass (rows × padded row length; None:
            chosen for the device).
    """

    def __init__(
        self,
        path_or_id: str,
        *,
        device: str = "auto",
        dtype="auto",
        batch_size: int | None = None,
        max_length: int | None = None,
        add_bos: bool | None = None,
        label: str | None = None,
        share_prefix: bool = True,
        batch_tokens: int | None = None,
        _model=None,
        _tokenizer=None,
    ):
        import torch

        self.device = resolve_device(device)
        self.dtype = _resolve_dtype(dtype, self.device)
        if (batch_size is not None and batch_size < 1) or (batch_tokens is not None and batch_tokens < 1):
            raise InputError("batch_size and batch_tokens must be positive.")
        self._batch_size_arg, self._batch_tokens_arg = batch_size, batch_tokens
        self.share_prefix = share_prefix
        #: Run batches with long chains as chains then trees (:meth:`_run_split`).
        self.split_chains = True
        if _model is not None:
            self._model, self._tokenizer = _model, _tokenizer
            self._label = label or "in-memory"
        else:
            self._model, self._tokenizer = self._load(path_or_id)
            self._label = label or (
                str(Path(path_or_id).resolve()) if Path(path_or_id).exists() else path_or_id
            )
        self._model.to(device=self.device, dtype=self.dtype)
        self._model.eval()
        config = self._model.config
        self._softcap = getattr(config, "final_logit_softcapping", None)
        sliding = getattr(config, "sliding_window", None)
        uses_sliding = getattr(config, "use_sliding_window", True) is not False and (
            getattr(config, "layer_types", None) is None or "sliding_attention" in config.layer_types
        )
        #: The attention window of sliding-window layers, None when the model has none.
        self.sliding_window = int(sliding) if sliding and uses_sliding else None
        tok = self._tokenizer
        if add_bos is None:
            with_special = tok("a").input_ids
            add_bos = bool(tok.bos_token_id is not None and with_special and with_special[0] == tok.bos_token_id)
        if add_bos and tok.bos_token_id is None:
            raise InputError("add_bos=True but the tokenizer has no BOS token.")
        self.add_bos = bool(add_bos)
        self._start_token = start_token(tok)
        window = max_length or getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
        if window is None and tok.model_max_length and tok.model_max_length < 10**7:
            window = tok.model_max_length
        self.max_length = int(window) if window else None
        #: Tokens run through the model (padding excluded), and padding tokens, since creation.
        self.tokens_run = 0
        self.tokens_padded = 0
        #: Distinct predicting positions whose vocabulary log-sum-exp was computed, and the
        #: output-layer calls that computed them, since creation.
        self.positions_run = 0
        self.output_layer_calls = 0
        #: Wall seconds of scoring since creation, by phase (``kgprobe bench throughput``
        #: reports the shares): tokenize (encoding), forward (the network up to the last
        #: hidden states), output_layer (vocabulary log-sum-exp, argmax, scored logits),
        #: total (all of ``score``; total minus the others is planning and packing).
        self.phase_seconds = dict.fromkeys(("tokenize", "forward", "output_layer", "total"), 0.0)
        self._torch = torch
        head = self._model.get_output_embeddings()
        #: Log-sum-exp over vocabulary slices (CPU float32 with a plain linear output layer).
        self._vocab_sliced = (
            self.device.type == "cpu" and self.dtype == torch.float32 and isinstance(head, torch.nn.Linear)
        )
        self.batch_size, self.batch_tokens, self._logit_rows = self._auto_batching()
        if self._batch_size_arg is not None:
            self.batch_size = self._batch_size_arg
        if self._batch_tokens_arg is not None:
            self.batch_tokens = self._batch_tokens_arg

    def _auto_batching(self) -> tuple[int, int, int]:
        """``(rows, tokens per forward pass, positions per output-layer chunk)`` for the device.

        CPU: 16 rows / 4,096 tokens (larger passes only add cache misses on a CPU; the
        figures of ``kgprobe bench scoring`` were measured with them). CUDA: a quarter of
        the GPU memory free now, divided by what one token of a forward pass holds (its
        KV cache over all layers, the MLP activations of one layer, a mask row of up to
        4,096 keys), between 4,096 and 262,144 tokens; logit chunks get a tenth of it.
        """
        config = self._model.config
        vocab = int(getattr(config, "vocab_size", 0) or len(self._tokenizer))
        if self.device.type != "cuda":
            return 16, 4096, 512
        torch = self._torch
        free, _ = torch.cuda.mem_get_info(self.device)
        element = torch.finfo(self.dtype).bits // 8
        hidden = int(getattr(config, "hidden_size", 1024))
        layers = int(getattr(config, "num_hidden_layers", 24))
        heads = int(getattr(config, "num_attention_heads", 16))
        kv_dim = int(getattr(config, "num_key_value_heads", heads) or heads) * int(
            getattr(config, "head_dim", None) or hidden // heads)
        intermediate = int(getattr(config, "intermediate_size", 4 * hidden))
        per_token = element * (2 * layers * kv_dim + 4 * intermediate + 6 * hidden) + element * 4096
        tokens = int(min(max(free // 4 // per_token, 4096), 262_144))
        logit_rows = int(min(max(free // 10 // (vocab * 4 * 2), 256), 16_384))
        return 256, tokens, logit_rows

    # ------------------------------------------------------------------ loading
    @staticmethod
    def _load(path_or_id: str):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path = Path(path_or_id).expanduser()
        # Hub ids look like "name" or "org/name"; anything else is meant as a local path.
        looks_local = path_or_id.startswith((".", "/", "~")) or path_or_id.count("/") > 1
        if not path.exists() and looks_local:
            raise ModelError(f"model directory {path} does not exist; give a directory with config.json "
                             "and weights, a hub id, or `default`.")
        if path.exists() and not (path / "config.json").is_file():
            raise ModelError(f"{path} is not a transformers model directory (no config.json).")
        source = str(path) if path.exists() else path_or_id
        try:
            with _no_progress_bars():
                tokenizer = AutoTokenizer.from_pretrained(source)
                model = AutoModelForCausalLM.from_pretrained(source, **dtype_kwarg(torch.float32))
        except Exception as exc:  # corrupt weights, unknown architecture, no network for a hub id
            raise ModelError(
                f"cannot load model {path_or_id!r}: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}. "
                "Check that the directory holds complete, uncorrupted weights (re-download or, for the "
                "default model, run `kgprobe models install-default --force`)."
            ) from exc
        return model, tokenizer

    @classmethod
    def from_components(cls, model, tokenizer, *, label: str, **kwargs) -> "TransformersModel":
        """Wrap an already-built model and tokenizer (used for the tiny test model)."""
        return cls(label, _model=model, _tokenizer=tokenizer, label=label, **kwargs)

    # ------------------------------------------------------------------ interface
    @property
    def identity(self) -> str:
        dtype = str(self.dtype).replace("torch.", "")
        return f"transformers:{self._label}|dtype={dtype}|bos={int(self.add_bos)}"

    @property
    def model(self):
        return self._model

