"""What an OpenAI-compatible server says about itself: which server, its context window.

:func:`probe` asks a local server (never OpenAI's own API) a few cheap questions, each
with a short timeout, and never fails: what it cannot learn is None.

- ``GET {base}/models`` — ``llama_cpp.server`` (llama-cpp-python) answers
  ``owned_by: "me"`` and reports no window; vLLM reports ``max_model_len``; llama.cpp's
  own ``llama-server`` reports ``meta.n_ctx_train``.
- ``GET {root}/props`` — ``llama-server`` reports the window it runs with
  (``default_generation_settings.n_ctx``), which wins over the trained one.
- ``POST {root}/extras/tokenize`` (llama-cpp-python only) — whether ``<|im_start|>``
  is one special token, i.e. the model speaks ChatML.
- two one-token chat completions (llama-cpp-python with ChatML only), one message of
  ``<`` and one of ``a`` — whether the chat handler HTML-escapes messages: the
  ``chatml-function-calling`` handler renders ``<`` as ``&lt;`` (more prompt tokens).
  Then ctxline renders the prompt itself (:mod:`ctxline.models.chatml`) and bypasses
  that handler; a server on the GGUF's own template keeps the chat endpoint.

    info = probe("http://127.0.0.1:8080/v1")
    info.kind, info.context_window, info.escapes   # ('llama-cpp-python', None, True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

__all__ = ["ServerInfo", "ServerKind", "is_openai", "probe"]

ServerKind = Literal["openai", "llama-cpp-python", "llama.cpp", "vllm", "ollama", "unknown"]


@dataclass(frozen=True, slots=True)
class ServerInfo:
    kind: ServerKind
    context_window: int | None = None
    """The window the server runs with (or was trained for), where it says."""
    source: str = ""
    """Where :attr:`context_window` came from (``GET /props``), for messages."""
    chatml: bool = False
    """llama-cpp-python with a ChatML vocabulary: prompts can be rendered by ctxline."""
    escapes: bool = False
    """Its chat handler HTML-escapes messages (llama-cpp-python's chatml-function-calling)."""

    @property
    def raw_prompt(self) -> bool:
        """Whether ctxline should render the ChatML prompt and use ``/v1/completions``."""
        return self.kind == "llama-cpp-python" and self.chatml and self.escapes


def is_openai(base_url: str | None) -> bool:
    """Whether ``base_url`` is OpenAI's own API (None means the SDK's default, OpenAI)."""
    if base_url is None:
        return True
    host = (urlsplit(base_url).hostname or "").lower()
    return host == "api.openai.com"


def _root(base_url: str) -> str:
    base = base_url.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


def _get(client: Any, url: str) -> Any:
    try:
        response = client.get(url)
        return response.json() if response.status_code == 200 else None
    except Exception:  # a server that does not answer this question: nothing learned
        return None


def _post(client: Any, url: str, body: dict[str, Any], timeout: float | None = None) -> Any:
    try:
        response = client.post(url, json=body, **({"timeout": timeout} if timeout else {}))
        return response.json() if response.status_code == 200 else None
    except Exception:
        return None


def _positive(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _prompt_tokens(client: Any, base_url: str, model: str, text: str) -> int | None:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": text}],
        "max_tokens": 1,
        "temperature": 0,
    }
    # a one-token generation: allow a busy CPU server its time
    reply = _post(client, base_url.rstrip("/") + "/chat/completions", body, timeout=60.0)
    usage = reply.get("usage") if isinstance(reply, dict) else None
    return _positive(usage.get("prompt_tokens")) if isinstance(usage, dict) else None


def _escapes(client: Any, base_url: str, model: str) -> bool:
    """Whether the chat handler HTML-escapes message text (``<`` costs more than ``a``)."""
    angle = _prompt_tokens(client, base_url, model, "<" * 8)
    plain = _prompt_tokens(client, base_url, model, "a" * 8)
    return angle is not None and plain is not None and angle > plain + 4


def probe(base_url: str, *, timeout: float = 3.0, api_key: str | None = None) -> ServerInfo:
    """What the server at ``base_url`` (ending in ``/v1``) reports; see the module doc."""
    if is_openai(base_url):
        return ServerInfo("openai")
    import httpx2 as httpx  # the HTTP library of the openai SDK (the openai extra)

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    root = _root(base_url)
    with httpx.Client(timeout=timeout, headers=headers) as client:
        models = _get(client, base_url.rstrip("/") + "/models")
        data = models.get("data") if isinstance(models, dict) else None
        first: dict[str, Any] = data[0] if isinstance(data, list) and data else {}
        if not isinstance(first, dict):
            first = {}
        if first.get("owned_by") == "me":  # llama-cpp-python's server
            tokens = _post(client, root + "/extras/tokenize", {"input": "<|im_start|>"})
            ids = tokens.get("tokens") if isinstance(tokens, dict) else None
            chatml = isinstance(ids, list) and len(ids) == 1
            escapes = chatml and _escapes(client, base_url, str(first.get("id", "")))
            return ServerInfo("llama-cpp-python", chatml=chatml, escapes=escapes)
        if window := _positive(first.get("max_model_len")):
            return ServerInfo("vllm", window, "GET /v1/models max_model_len")
        props = _get(client, root + "/props")
        if isinstance(props, dict):
            settings = props.get("default_generation_settings")
            n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else props.get("n_ctx")
            if window := _positive(n_ctx):
                return ServerInfo("llama.cpp", window, "GET /props n_ctx")
        meta = first.get("meta")
        if isinstance(meta, dict) and (window := _positive(meta.get("n_ctx_train"))):
            return ServerInfo("llama.cpp", window, "GET /v1/models meta.n_ctx_train")
        if first.get("owned_by") == "library":
            return ServerInfo("ollama")
    return ServerInfo("unknown")
