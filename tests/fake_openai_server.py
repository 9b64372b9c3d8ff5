"""A recording fake OpenAI-compatible server on 127.0.0.1, for the client contract tests.

A real HTTP server (``http.server`` in a thread) that records every request — method,
path and JSON body — and answers chat and text completions from a queue of canned
replies (text, or tool calls). ``flavor`` says which local server it plays, by what
that server answers to ctxline's probes:

- ``"llama-cpp-python-fc"``: ``llama_cpp.server --chat_format chatml-function-calling``:
  ``/v1/models`` owned by ``"me"``, a ChatML vocabulary on ``/extras/tokenize``, and a
  chat handler that HTML-escapes messages (seen in its prompt token counts);
- ``"llama-cpp-python"``: the same server on the GGUF's own template (no escaping);
- ``"llama.cpp"``: ``llama-server`` with ``GET /props`` → ``n_ctx``;
- ``"vllm"``: ``max_model_len`` in ``/v1/models``;
- ``"plain"``: a server that says nothing about itself.

    with fake_openai_server("vllm", [Reply(calls=(("read_file", {"path": "a"}),)), Reply("done")]) as fake:
        OpenAIClient("m", base_url=fake.base_url).complete(body)
        fake.requests[-1].body["max_tokens"]
"""

from __future__ import annotations

import html
import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

__all__ = ["FakeServer", "Flavor", "Recorded", "Reply", "fake_openai_server"]

Flavor = Literal["llama-cpp-python-fc", "llama-cpp-python", "llama.cpp", "vllm", "plain"]
WINDOW = 8_192


@dataclass(frozen=True)
class Reply:
    """One canned answer: text, tool calls ``(name, arguments)``, or an HTTP error."""

    text: str = ""
    calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    status: int = 200
    error: str = ""


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    body: dict[str, Any]


@dataclass
class FakeServer:
    flavor: Flavor
    replies: list[Reply]
    base_url: str = ""
    requests: list[Recorded] = field(default_factory=list)

    def completions(self) -> list[dict[str, Any]]:
        """The bodies of the model calls (chat or text), probes left out."""
        return [
            r.body
            for r in self.requests
            if r.path in ("/v1/chat/completions", "/v1/completions")
            and r.body.get("max_tokens") != 1
        ]


def _message_tokens(body: dict[str, Any], escapes: bool) -> int:
    """A stand-in prompt size: one token per character of the (escaped) messages."""
    text = "".join(str(m.get("content") or "") for m in body.get("messages", []))
    return len(html.escape(text) if escapes else text)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def _send(self, status: int, obj: object) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        fake = self.server.fake
        fake.requests.append(Recorded("GET", self.path, {}))
        if self.path == "/v1/models":
            model: dict[str, Any] = {"id": "qwen", "object": "model", "owned_by": "fake"}
            if fake.flavor.startswith("llama-cpp-python"):
                model["owned_by"] = "me"
            elif fake.flavor == "vllm":
                model["max_model_len"] = WINDOW
            self._send(200, {"object": "list", "data": [model]})
        elif self.path == "/props" and fake.flavor == "llama.cpp":
            self._send(200, {"default_generation_settings": {"n_ctx": WINDOW}})
        else:
            self._send(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        fake = self.server.fake
        length = int(self.headers.get("Content-Length", "0"))
        body: dict[str, Any] = json.loads(self.rfile.read(length) or b"{}")
        fake.requests.append(Recorded("POST", self.path, body))
        if self.path == "/extras/tokenize" and fake.flavor.startswith("llama-cpp-python"):
            self._send(200, {"tokens": [151644] if body.get("input") == "<|im_start|>" else []})
            return
        if self.path not in ("/v1/chat/completions", "/v1/completions"):
            self._send(404, {"detail": "Not Found"})
            return
        if body.get("max_tokens") == 1:  # ctxline's probe of the chat handler
            tokens = _message_tokens(body, fake.flavor == "llama-cpp-python-fc")
            self._send(200, _chat(Reply("x"), tokens))
            return
        reply = fake.replies.pop(0) if fake.replies else Reply("(no more canned replies)")
        if reply.status != 200:
            self._send(reply.status, {"error": {"message": reply.error, "type": "server_error"}})
        elif self.path == "/v1/completions":
            self._send(200, _text_completion(reply, len(str(body.get("prompt", "")))))
        else:
            self._send(200, _chat(reply, _message_tokens(body, False)))


def _chat(reply: Reply, prompt_tokens: int) -> dict[str, Any]:
    calls = [
        {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        for i, (name, arguments) in enumerate(reply.calls)
    ]
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": "qwen",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if calls else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": 3,
            "total_tokens": prompt_tokens + 3,
        },
    }


def _text_completion(reply: Reply, prompt_tokens: int) -> dict[str, Any]:
    text = reply.text + "".join(
        f'<tool_call>\n{{"name": "{name}", "arguments": {json.dumps(arguments)}}}\n</tool_call>'
        for name, arguments in reply.calls
    )
    return {
        "id": "cmpl-fake",
        "object": "text_completion",
        "created": 0,
        "model": "qwen",
        "choices": [{"index": 0, "text": text, "finish_reason": "stop", "logprobs": None}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": 3,
            "total_tokens": prompt_tokens + 3,
        },
    }


class _Server(ThreadingHTTPServer):
    fake: FakeServer


@contextmanager
def fake_openai_server(flavor: Flavor, replies: Sequence[Reply] = ()) -> Iterator[FakeServer]:
    """The running fake (its ``base_url`` ends in ``/v1``); stopped on exit."""
    server = _Server(("127.0.0.1", 0), _Handler)
    fake = FakeServer(flavor, list(replies))
    server.fake = fake
    fake.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
