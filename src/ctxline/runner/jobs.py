"""Background jobs: a call returns a handle at once, its completion arrives as a notification.

Why: a build or a long search should not block the loop, and its completion is not a
request from the user (seed 000). A tool marked ``background=True`` starts a job: the
call's result is the job's handle (``job-3 started``); when the job ends the runner
appends ONE ``notification`` event (``source="job/job-3"``), the full output saved as a
blob and its handle in the notification's ``ref`` (``read_result`` pages through it).
Completions are drained before the next step, so the model sees each exactly once.

Running jobs are listed in the tail as ``<ctx-jobs>`` (the :class:`JobsSource`), folded
from the record: a started job (``meta.runner.job`` of its result) stays listed until
its notification. A job that was running when the runner died is reported, on resume,
by a notification saying its output is lost — never silently forgotten.

    @tool(background=True, timeout=600)
    def build(target: str) -> str: ...
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any

from ctxline.record.blobs import BlobStore
from ctxline.record.events import Event, JsonValue, Notification, StoredEvent, ToolResult
from ctxline.runner.ledger import JobInfo, runner_meta
from ctxline.sources.base import BaseSource, Block, SourceStep, StepContext, TailItem
from ctxline.sources.guide import JOBS_KIND, NOTIFICATION_KIND, MessageKind

__all__ = ["JOBS_KIND", "JobManager", "JobsSource", "interrupted_job", "one_line"]

PREVIEW_CHARS = 300


def one_line(text: str, width: int = PREVIEW_CHARS) -> str:
    """``text`` flattened to one line (no newline can imitate a line of a block), clipped."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


@dataclass(frozen=True, slots=True)
class _Done:
    job: str
    tool: str
    call_id: str
    output: str
    ok: bool
    seconds: float


def interrupted_job(info: JobInfo) -> Notification:
    """The notification of a job that was running when the runner stopped."""
    return Notification(
        f"job/{info.job}",
        f"job {info.job} ({info.tool}) ended without a result: the runner stopped before it "
        "finished, so its output is lost. Start it again if you still need it.",
        meta={
            "runner": {"job": info.job, "call_id": info.call_id, "ok": False, "interrupted": True}
        },
    )


class JobManager:
    """The jobs of one runner process (tasks on its event loop)."""

    def __init__(self) -> None:
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._done: list[_Done] = []
        self._wake = asyncio.Event()
        self._next = 0

    def new_id(self, recorded: int) -> str:
        """A fresh job id (``recorded``: jobs the record already has)."""
        self._next = max(self._next, recorded) + 1
        return f"job-{self._next}"

    def start(
        self, job: str, tool: str, call_id: str, work: Awaitable[Any], timeout: float
    ) -> None:
        from ctxline.runner.tools import render_value

        async def run() -> None:
            started = time.monotonic()
            try:
                value = await asyncio.wait_for(work, timeout)
                outcome = render_value(value)
                output, ok = outcome.content, not outcome.is_error
            except TimeoutError:
                output, ok = f"the job took longer than {timeout:g} s and was stopped", False
            except asyncio.CancelledError:
                output, ok = "the job was cancelled", False
            except Exception as exc:
                from ctxline.tools.errors import detailed_tool_error

                output, ok = detailed_tool_error(exc, tool, {}), False
            self._done.append(_Done(job, tool, call_id, output, ok, time.monotonic() - started))
            self._wake.set()

        self._tasks[job] = asyncio.ensure_future(run())

    @property
    def running(self) -> list[str]:
        return [job for job, task in self._tasks.items() if not task.done()]

    def drain(self, blobs: BlobStore) -> list[Event]:
        """The notifications of the jobs that ended since the last drain (output saved first)."""
        out: list[Event] = []
        for done in self._done:
            data = done.output.encode()
            ref = blobs.put(data)
            status = "finished" if done.ok else "failed"
            text = (
                f"job {done.job} ({done.tool}) {status} after {done.seconds:.1f} s; its output is "
                f'{len(done.output):,} characters, saved whole: read_result(handle="{ref}"). '
                f"It begins: {one_line(done.output)}"
            )
            meta: dict[str, JsonValue] = {
                "runner": {
                    "job": done.job,
                    "call_id": done.call_id,
                    "ok": done.ok,
                    "ms": round(done.seconds * 1000),
                }
            }
            out.append(Notification(f"job/{done.job}", text, ref, meta))
            self._tasks.pop(done.job, None)
        self._done = []
        self._wake.clear()
        return out

    async def wait(self, timeout: float | None = None) -> bool:
        """Wait until a job ends (or ``timeout``); True when one has ended and is not drained."""
        if self._done:
            return True
        if not self.running:
            return False
        try:
            await asyncio.wait_for(self._wake.wait(), timeout)
        except TimeoutError:
            return False
        return bool(self._done)

    async def cancel_all(self) -> None:
        for task in self._tasks.values():
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks.values(), return_exceptions=True)


class _JobsFold:
    def __init__(self) -> None:
        self.running: dict[str, str] = {}

    def feed(self, stored: StoredEvent) -> Sequence[MessageKind]:
        event = stored.event
        if isinstance(event, ToolResult):
            job = runner_meta(event.meta).get("job")
            if isinstance(job, str) and job:
                self.running[job] = event.name
                return (JOBS_KIND,)
        elif isinstance(event, Notification):
            job = runner_meta(event.meta).get("job")
            if isinstance(job, str):
                self.running.pop(job, None)
        return ()


class JobsSource(BaseSource):
    """``<ctx-jobs>`` in the tail while jobs run (folded from the record, so rebuilds agree).

    ``announce``: the agent has background tools, so the guide explains ``<ctx-jobs>`` and
    ``<ctx-notification>`` from the first request — registered only when the first job
    starts, they would change the system prompt mid-task, and a local server re-reads
    the whole prompt after such a change (measured on Qwen2.5-Coder-1.5B through
    llama.cpp: 811 of 975 prompt tokens evaluated again, benchmarks/README.md)."""

    name = "jobs"

    def __init__(self, *, announce: bool = False) -> None:
        self.announce = announce

    def kinds(self) -> Sequence[MessageKind]:
        return (JOBS_KIND, NOTIFICATION_KIND) if self.announce else ()

    def fold(self) -> _JobsFold:
        return _JobsFold()

    def step(self, fold: _JobsFold, ctx: StepContext) -> SourceStep:
        assert isinstance(fold, _JobsFold)
        if not fold.running:
            return SourceStep()
        lines = [
            f"- {one_line(job, 80)}: {one_line(tool, 80)}" for job, tool in fold.running.items()
        ]
        block = Block("ctx-jobs", "\n" + "\n".join(lines) + "\n")
        return SourceStep(
            tail=(TailItem("jobs", block.render()),), meta={"running": list(fold.running)}
        )
