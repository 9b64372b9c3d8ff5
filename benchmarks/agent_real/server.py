"""One in-process OpenAI-compatible server over llama.cpp, shared by the three loops.

Why: the benchmark compares agent loops, so everything else must be the same: one GGUF,
one prompt format (Qwen2.5's own ChatML template, :func:`ctxline.models.chatml.chatml_prompt`,
byte-equal to the GGUF's), the same stop tokens, temperature 0, and the same parse of
``<tool_call>`` blocks back into Chat Completions ``tool_calls``. llama-cpp-python's own
server cannot be used as is (its ``chatml-function-calling`` handler drops tool results
and HTML-escapes messages; see docs/eval.md "Real models").

Each loop gets its own ``llama_cpp.Llama`` (named by the request's ``model``): the
weights are mmapped once and shared, each instance keeps its own KV cache, so llama.cpp's
prefix reuse is what that loop's prompts allow, as if each loop had its own server slot.
Every request is logged: prompt tokens, tokens actually evaluated (the rest reused from
the cache: the longest common prefix with the previous prompt of that instance),
completion tokens, calls emitted, wall seconds. With ``BENCH_DUMP=FILE`` in the
environment every rendered prompt is appended to FILE too, after a ``===== LOOP`` line
(what the model read, to replay a step against variants).

    server = ModelServer(gguf, names=("ctxline", "plain", "sdk"), threads=2)
    base_url = server.start()          # http://127.0.0.1:PORT/v1
    ...; server.log; server.stop()
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ctxline.models.chatml import CHATML_STOP, chatml_prompt, parse_tool_calls

__all__ = ["ModelServer", "RequestLog", "chat_reply", "common_prefix", "tool_names"]

N_CTX = 8192


@dataclass(frozen=True, slots=True)
class RequestLog:
    """One completion as the server ran it."""

    model: str
    prompt_tokens: int
    evaluated: int
    """Prompt tokens llama.cpp evaluated (``prompt_tokens - evaluated`` came from its cache)."""
    completion_tokens: int
    tool_calls: int
    seconds: float
    finish: str
    text: str = ""
    """The first 200 characters the model generated."""


def common_prefix(previous: Sequence[int], tokens: Sequence[int]) -> int:
    """How many leading tokens llama.cpp reuses: the common prefix, never the last token
    (``Llama.generate`` always evaluates at least the prompt's last token)."""
    n = 0
    for a, b in zip(previous, tokens[:-1], strict=False):
        if a != b:
            break
        n += 1
    return n


def tool_names(tools: Sequence[Mapping[str, Any]] | None) -> set[str]:
    """The function names of a Chat Completions ``tools`` list."""
    names: set[str] = set()
    for tool in tools or ():
        function = tool.get("function", tool)
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            names.add(function["name"])
    return names


def chat_reply(text: str, names: Collection[str]) -> tuple[str, list[dict[str, Any]]]:
    """The generated text as a Chat Completions message: content and ``tool_calls``."""
    content, calls = parse_tool_calls(text, names)
    return content, [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
        }
        for call in calls
    ]


class _Backend:
    """One ``Llama`` per loop name, one completion at a time (2 cores: no parallelism)."""

    def __init__(self, gguf: str, names: Sequence[str], threads: int, max_tokens: int) -> None:
        import llama_cpp

        self.models = {
            name: llama_cpp.Llama(
                model_path=gguf, n_ctx=N_CTX, n_threads=threads, seed=0, verbose=False
            )
            for name in names
        }
        self.max_tokens = max_tokens
        self.lock = threading.Lock()
        self.log: list[RequestLog] = []

    def complete(self, body: Mapping[str, Any]) -> dict[str, Any]:
        name = str(body.get("model", ""))
        llm = self.models.get(name)
        if llm is None:
            raise KeyError(f"unknown model {name!r}; expected one of {sorted(self.models)}")
        tools = body.get("tools") or None
        prompt = chatml_prompt(body.get("messages", []), tools)
        dump = os.environ.get("BENCH_DUMP")
        if dump:
            with open(dump, "a", encoding="utf-8") as fh:
                fh.write(f"===== {name}\n{prompt}\n")
        cap = body.get("max_tokens") or body.get("max_completion_tokens") or self.max_tokens
        with self.lock:
            started = time.perf_counter()
            tokens = llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
            room = N_CTX - len(tokens)
            if room < 8:
                raise ValueError(f"prompt of {len(tokens)} tokens exceeds the {N_CTX} window")
            reused = common_prefix(list(llm.input_ids[: llm.n_tokens]), tokens)
            out: Any = llm.create_completion(
                tokens,
                max_tokens=min(int(cap), self.max_tokens, room),
                temperature=0.0,
                seed=0,
                stop=list(CHATML_STOP),
            )
            seconds = time.perf_counter() - started
        choice = out["choices"][0]
        content, calls = chat_reply(choice["text"], tool_names(tools))
        usage = out["usage"]
        self.log.append(
            RequestLog(
                name,
                len(tokens),
                len(tokens) - reused,
                int(usage["completion_tokens"]),
                len(calls),
                round(seconds, 3),
                str(choice.get("finish_reason")),
                choice["text"][:200],
            )
        )
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = calls
        return {
            "id": f"chatcmpl-{len(self.log)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": name,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if calls else choice.get("finish_reason"),
                }
            ],
            "usage": {
                "prompt_tokens": len(tokens),
                "completion_tokens": int(usage["completion_tokens"]),
                "total_tokens": len(tokens) + int(usage["completion_tokens"]),
                "prompt_tokens_details": {"cached_tokens": reused},
            },
        }


class ModelServer:
    """The HTTP front (see the module docstring): ``/v1/chat/completions``, ``/v1/models``
    and ``/props`` (so ctxline's client reads the 8,192-token window as from llama-server)."""

    def __init__(
        self, gguf: str, names: Sequence[str], threads: int = 2, max_tokens: int = 256
    ) -> None:
        self.backend = _Backend(gguf, names, threads, max_tokens)
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def log(self) -> list[RequestLog]:
        return self.backend.log

    def start(self) -> str:
        backend = self.backend

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def _send(self, status: int, payload: object) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    data = [
                        {"id": n, "object": "model", "owned_by": "bench"} for n in backend.models
                    ]
                    self._send(200, {"object": "list", "data": data})
                elif self.path.rstrip("/") == "/props":
                    self._send(200, {"default_generation_settings": {"n_ctx": N_CTX}})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                    if not self.path.rstrip("/").endswith("/chat/completions"):
                        self._send(404, {"error": {"message": f"no route {self.path}"}})
                        return
                    self._send(200, backend.complete(body))
                except (KeyError, ValueError) as exc:
                    self._send(400, {"error": {"message": str(exc)}})

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
