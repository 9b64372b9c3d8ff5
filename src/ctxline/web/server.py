"""Run the inspector with uvicorn: in the foreground (``ctxline serve``) or in a thread (tests).

The socket is bound before the server starts, so port 0 picks a free port and the URL
is known at once; :func:`serve_in_thread` returns only when the server accepts
connections, and :meth:`RunningServer.stop` waits until it has shut down.

    with serve_in_thread(create_app(record)) as server:
        urllib.request.urlopen(server.url)
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any

__all__ = ["RunningServer", "bind", "serve_in_thread"]


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host``:``port`` (IPv6 when the host is one)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host.strip("[]"), port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


@dataclass
class RunningServer:
    url: str
    server: Any
    thread: threading.Thread

    def stop(self, timeout: float = 10.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise RuntimeError(f"the inspector at {self.url} did not stop within {timeout} s")

    def __enter__(self) -> RunningServer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def serve_in_thread(
    app: Any, host: str = "127.0.0.1", port: int = 0, timeout: float = 20.0
) -> RunningServer:
    """Start uvicorn on a thread; returns once it accepts connections."""
    import uvicorn

    sock = bind(host, port)
    actual = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="ctxline-serve"
    )
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the inspector's server thread ended before it started")
        if time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"the inspector did not start within {timeout} s")
        time.sleep(0.02)
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    return RunningServer(f"http://{shown}:{actual}", server, thread)
