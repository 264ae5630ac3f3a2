"""transformers backend, generation: batched greedy or sampled continuations that stop at
the request's stop strings."""

from __future__ import annotations

import os
from typing import Sequence


from kgprobe.errors import InputError
from kgprobe.models.base import GenerateRequest, check_generate_request
from kgprobe.models.tokens import cut_at_stop


def stop_criteria(tokenizer, stops_per_row: list[list[str]], prompt_width: int):
    """Stop each row once its *generated* text contains one of that row's stop strings.

    transformers' own ``stop_strings`` also matches text that overlaps the end of the
    prompt (prompt "... is" + stop "s " stops after one token), so kgprobe checks only
    the new tokens.
    """
    import torch
    from transformers import StoppingCriteria, StoppingCriteriaList

    class StopOnGeneratedText(StoppingCriteria):
        def __call__(self, input_ids, scores, **kwargs):
            done = [
                bool(stops) and any(s in tokenizer.decode(row[prompt_width:], skip_special_tokens=True) for s in stops)
                for row, stops in zip(input_ids, stops_per_row)
            ]
            return torch.tensor(done, dtype=torch.bool, device=input_ids.device)

    return StoppingCriteriaList([StopOnGeneratedText()])


class Generation:
    """The generation half of :class:`~kgprobe.models.hf_backend.TransformersModel` (a mixin)."""

    def generate(self, requests: Sequence[GenerateRequest]) -> list[str]:
        """Greedy requests are batched (left padding); sampled ones run one by one, seeded."""
        torch = self._torch
        prompts = []
        for index, request in enumerate(requests):
            check_generate_request(index, request)
            ids = self._prompt_ids(request)
            if self.max_length is not None and len(ids) + request.max_tokens > self.max_length:
                raise InputError(
                    f"generate request {index}: prompt of {len(ids)} tokens plus max_tokens="
                    f"{request.max_tokens} exceeds the model window of {self.max_length} tokens; "
                    "shorten the prompt (kgprobe does not truncate)."
                )
            prompts.append(ids)
        outputs: list[str | None] = [None] * len(requests)
        greedy_groups: dict[int, list[int]] = {}
        with torch.inference_mode():
            for index, request in enumerate(requests):
                if request.temperature == 0:
                    greedy_groups.setdefault(request.max_tokens, []).append(index)
                else:
                    outputs[index] = self._generate_batch([prompts[index]], request, seed=request.seed)[0]
            for max_tokens, members in greedy_groups.items():
                members.sort(key=lambda m: len(prompts[m]))
                for start in range(0, len(members), self.batch_size):
                    chunk = members[start : start + self.batch_size]
                    texts = self._generate_batch([prompts[m] for m in chunk], requests[chunk[0]], seed=None,
                                                 stops_per_row=[list(requests[m].stop) for m in chunk])
                    for m, text in zip(chunk, texts):
                        outputs[m] = text
        return [cut_at_stop(text, request.stop) for text, request in zip(outputs, requests)]

    def _generate_batch(self, prompts: list[list[int]], request: GenerateRequest, *, seed,
                        stops_per_row: list[list[str]] | None = None) -> list[str]:
        """Generate for prompts sharing ``request``'s settings; each row stops on its own strings."""
        torch = self._torch
        from transformers import GenerationConfig

        tok = self._tokenizer
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), pad, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for r, p in enumerate(prompts):
            ids[r, width - len(p) :] = torch.tensor(p)
            mask[r, width - len(p) :] = 1
        sampled = request.temperature > 0
        if stops_per_row is None:
            stops_per_row = [list(request.stop)] * len(prompts)
        stops_per_row = [[s for s in stops if s] for stops in stops_per_row]
        config = GenerationConfig(
            max_new_tokens=request.max_tokens,
            do_sample=sampled,
            temperature=request.temperature if sampled else None,
            top_k=None,
            top_p=None,
            pad_token_id=pad,
            eos_token_id=tok.eos_token_id,
        )
        if sampled:
            torch.manual_seed(seed if seed is not None else int.from_bytes(os.urandom(4), "little"))
        out = self._model.generate(
            input_ids=ids.to(self.device),
            attention_mask=mask.to(self.device),
            generation_config=config,
            stopping_criteria=stop_criteria(tok, stops_per_row, width) if any(stops_per_row) else None,
        )
        self.tokens_run += int(mask.sum()) + int(out.shape[1] - width) * len(prompts)
        return [tok.decode(row[width:], skip_special_tokens=True) for row in out]
