"""llama.cpp's OpenAI-compatible server on the embedded SmolLM2 GGUF, for the HTTP tests.

Started on a free local port and stopped on exit; a server that does not answer
``/v1/models`` within 90 s fails the test with the tail of its log (the ``server``
extra of llama-cpp-python is in ``dev``).

    with llama_server() as base:  # "http://127.0.0.1:PORT/v1"
        OpenAIClient("smollm2", base_url=base)
"""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx2
import pytest

from ctxline.models.local import local_model_path

__all__ = ["free_port", "llama_server"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def llama_server(n_ctx: int = 4096) -> Iterator[str]:
    """The server's base URL while it runs (greedy: seed 0)."""
    port = free_port()
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(local_model_path()),
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx), "--seed", "0",
    ]  # fmt: skip
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log)
        base = f"http://127.0.0.1:{port}/v1"
        try:
            deadline = time.monotonic() + 90
            while True:
                try:
                    if httpx2.get(f"{base}/models", timeout=2).status_code == 200:
                        break
                except httpx2.HTTPError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    tail = log.read().decode("utf-8", "replace")[-2000:]
                    pytest.fail(f"llama_cpp.server did not start ([server] extra?): {tail}")
                time.sleep(0.3)
            yield base
        finally:
            proc.terminate()
            proc.wait(timeout=20)
