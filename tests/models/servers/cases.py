"""Score and generation requests shared by the vLLM offline and ``vllm serve`` tests."""

from __future__ import annotations

from kgprobe.models.base import GenerateRequest, ScoreRequest

#: A 12-example zero-prompt context (ZP-LKE shape): every score request below shares it.
PREFIX = (
    "France Paris, Germany Berlin, Italy Rome, Spain Madrid, Japan Tokyo, Egypt Cairo, "
    "Kenya Nairobi, Peru Lima, Chile Santiago, Norway Oslo, Poland Warsaw, Canada Ottawa, "
)
SUBJECTS = ("Austria", "Greece", "Cuba")
OPTIONS = (" Vienna", " Athens", " Havana", " Buenos Aires", " Reykjavik")

SCORE_REQUESTS = [ScoreRequest(PREFIX + s, o) for s in SUBJECTS for o in OPTIONS] + [
    # The boundary inside a token: "…Austria " + "Vienna" tokenizes like "…Austria Vienna",
    # so " Vienna" is one straddling token and must score like the request above.
    ScoreRequest(PREFIX + "Austria ", "Vienna"),
    # Yes/no shape: a question and a one-token answer.
    ScoreRequest("Question: Is Paris the capital of France? Answer:", " Yes"),
    ScoreRequest("Question: Is Paris the capital of France? Answer:", " No"),
]

GREEDY_REQUESTS = [
    GenerateRequest("The capital of France is", max_tokens=8),
    GenerateRequest(PREFIX + "Austria", max_tokens=6, stop=(",",)),
]

#: "What is the capital of France?" as a chat message; SmolLM2 answers
#: "The capital of France is Paris." (checked by hand with transformers greedy decoding).
CHAT_REQUEST = GenerateRequest("What is the capital of France?", max_tokens=12, chat=True)
