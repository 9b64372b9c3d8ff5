"""The child process that runs llama.cpp for :class:`~ctxline.models.local.LocalClient`.

:class:`~ctxline.models.local.LocalClient` starts this file as a script with
``python -P`` (so neither its folder nor the working directory shadows a module) and
talks to it in JSON lines: the first line on stdin is the load configuration, answered
by ``{"ok": true, "pid": …, "tools": …, "n_ctx_train": …}`` once the model is loaded
(``tools``: whether the GGUF's chat template renders tool schemas); then one request per line
(``{"op": "complete", "messages": …, "tools": …}``, or ``"prompt"`` and ``"stop"`` for a
prompt rendered by the parent; ``{"op": "render", "messages": …, "tools": …}``: the
template's prompt; ``{"op": "count", "text": …}``), one reply per line
(``{"ok": true, …}`` or ``{"ok": false, "error": "…"}``). It exits when stdin closes.

Replies go to a private duplicate of the original stdout; file descriptor 1 is pointed
at stderr before llama.cpp is loaded, so whatever native code prints can never corrupt
the protocol, and the parent sends stderr to a log file. A native crash — SIGSEGV in
``llama_decode``, an out-of-memory kill — ends only this process: the parent sees the
end of the stream and the signal, and starts a new worker on its next call.

Only the standard library and ``llama_cpp`` are imported here.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:  # typing only: this file runs as a script, importing none of ctxline
    from ctxline.record.jsonvalue import JsonObject

__all__ = ["main", "serve"]


def _shared_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _write(out: IO[bytes], obj: JsonObject) -> None:
    out.write(json.dumps(obj).encode("ascii") + b"\n")
    out.flush()


def _complete(llama: Any, request: dict[str, Any]) -> JsonObject:
    before = list(llama._input_ids)
    tools = request.get("tools") or None
    settings = {
        "temperature": float(request["temperature"]),
        "max_tokens": int(request["max_tokens"]),
        "seed": int(request["seed"]),
    }
    if "prompt" in request:  # rendered by the parent; special tokens are the prompt's own
        tokens = llama.tokenize(str(request["prompt"]).encode(), add_bos=False, special=True)
        out = llama.create_completion(tokens, stop=list(request.get("stop") or []), **settings)
        content = out["choices"][0].get("text")
    else:
        out = llama.create_chat_completion(
            messages=request["messages"], **settings, **({"tools": tools} if tools else {})
        )
        content = out["choices"][0]["message"].get("content")
    usage = out.get("usage") or {}
    prompt = int(usage.get("prompt_tokens", 0))
    reused = min(_shared_prefix(before, list(llama._input_ids[:prompt])), prompt)
    choice = out["choices"][0]
    return {
        "ok": True,
        "text": str(content or ""),
        "finish_reason": str(choice.get("finish_reason") or ""),
        "prompt_tokens": prompt,
        "completion_tokens": int(usage.get("completion_tokens", 0)),
        "reused": reused,
    }


def _render(llama: Any, template: str, request: dict[str, Any]) -> JsonObject:
    """The prompt the GGUF's own chat template makes of ``messages`` and ``tools``."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    model = llama._model
    eos, bos = llama.token_eos(), llama.token_bos()
    formatter = Jinja2ChatFormatter(
        template=template,
        eos_token=model.token_get_text(eos) if eos != -1 else "",
        bos_token=model.token_get_text(bos) if bos != -1 else "",
    )
    tools = request.get("tools") or None
    return {"ok": True, "prompt": formatter(messages=request["messages"], tools=tools).prompt}


def _error(exc: Exception) -> JsonObject:
    if isinstance(exc, ValueError | RuntimeError):  # e.g. a prompt longer than n_ctx
        return {"ok": False, "error": str(exc)}
    return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}


def serve(requests: IO[bytes], replies: IO[bytes]) -> None:
    """Load the model named by the first line of ``requests``, then answer line by line."""
    first = requests.readline()
    if not first:
        return
    config = json.loads(first)
    try:
        import llama_cpp

        llama = llama_cpp.Llama(
            model_path=str(config["model_path"]),
            n_ctx=int(config["n_ctx"]),
            n_threads=int(config["n_threads"]),
            n_threads_batch=int(config["n_threads"]),
            seed=int(config["seed"]),
            verbose=False,
        )
    except Exception as exc:
        _write(replies, _error(exc))
        return
    metadata = getattr(llama, "metadata", None) or {}
    template = str(metadata.get("tokenizer.chat_template", ""))
    arch = str(metadata.get("general.architecture", ""))
    trained = metadata.get(f"{arch}.context_length")
    _write(
        replies,
        {
            "ok": True,
            "pid": os.getpid(),
            "tools": "tools" in template,  # the GGUF's own template renders tool schemas
            "n_ctx_train": int(str(trained)) if str(trained or "").isdigit() else None,
        },
    )
    for line in requests:
        try:
            request = json.loads(line)
            op = request.get("op")
            if op == "complete":
                reply = _complete(llama, request)
            elif op == "render":
                reply = _render(llama, template, request)
            elif op == "count":
                text = str(request["text"])
                tokens = llama.tokenize(text.encode(), add_bos=False, special=False)
                reply = {"ok": True, "tokens": len(tokens)}
            else:
                reply = {"ok": False, "error": f"unknown request {op!r}"}
        except Exception as exc:
            reply = _error(exc)
        _write(replies, reply)


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the parent, which stops us
    replies = os.fdopen(os.dup(1), "wb")  # the protocol's own copy of stdout
    os.dup2(2, 1)  # anything else written to stdout, native code included, goes to the log
    sys.stdout = sys.stderr
    with replies:
        serve(sys.stdin.buffer, replies)


if __name__ == "__main__":
    main()
