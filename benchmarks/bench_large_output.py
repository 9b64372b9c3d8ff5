"""Peak memory of appending, reading and checking one very large tool output; one JSON object.

Why: an agent's tool can print hundreds of MB (a build log, a database dump). Before the
hardening of issue 12, appending one 200 MB output took 3.3-3.6 GB of RSS (about 18x the
payload) and ``ctxline doctor`` on that database 3.5 GB. The target: peak RSS under 3x
the payload for each step. Each measurement runs in a fresh process, so the peak
(``VmHWM``, the high-water mark of resident memory, which includes the interpreter and
the payload itself) belongs to that step alone:

* ``store.append``: ``SQLiteStore.append`` of a tool call and its 200 MB result, after
  ``put_text`` saved the result as a blob (what the timeline writer does);
* ``store.read``: reading the session back (every hash link checked);
* ``context.prepare``: a Context over that session preparing its next request (the
  result read back, shown as a preview with a handle, the step appended);
* ``doctor``: ``ctxline doctor`` on the database (every row parsed, every link and blob
  re-hashed, ``PRAGMA integrity_check``);
* ``cli.append``: ``ctxline append`` reading the same result as one JSONL line on stdin
  (into a database of its own);
* ``pg.append`` / ``pg.read`` with ``--pg DSN``: the same through PostgreSQL (client RSS);
* ``runner``: an :class:`~ctxline.runner.Agent` with a :class:`ScriptedModel` whose one tool
  returns the payload, made when the tool runs as a real tool's output is (the call, the
  result appended and saved, the next request prepared with the preview, the final
  reply), into a database of its own;
* ``langgraph`` (when LangGraph is installed): the same turn in LangGraph, a scripted model
  node and a ``ToolNode`` with the ``InMemorySaver`` checkpointer, for the side-by-side time
  (``runner_vs_langgraph`` in the JSON is the ratio of the two).

    .venv/bin/python benchmarks/bench_large_output.py [--sizes 50,200] [--dir DIR] [--pg DSN]
        [--only store,cli,runner,pg]

The payload is ASCII log lines built in one allocation (its size in MB is the 1x of the
ratio). A run at 50 and 200 MB takes about a minute and needs about 2 GB free on disk.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve()
SRC = str(HERE.parents[1] / "src")
MB = 1024 * 1024
SESSION = os.environ.get("BENCH_LARGE_SESSION", "big")
"""The session the store steps write and read: each PostgreSQL measurement gets a new one
(the server's database outlives the run, and a read of a session holding earlier runs'
outputs too measured all of them)."""
LINE = "2026-11-02T23:59:00Z build step {:07d}: compiling module and linking objects ok\n"


def payload(size_mb: int) -> str:
    """About ``size_mb`` MB of ASCII log text, made in one allocation (no list of lines)."""
    block = "".join(LINE.format(i) for i in range(1024))
    return block * max(1, size_mb * MB // len(block))


def payload_chars(size_mb: int) -> int:
    """``len(payload(size_mb))``, without making it."""
    block = len("".join(LINE.format(i) for i in range(1024)))
    return block * max(1, size_mb * MB // block)


def vm_hwm_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


# --- the child side: one step, then its peak ------------------------------------------------


def child(step: str, url: str, size_mb: int) -> dict[str, float]:
    from ctxline.record.events import AssistantMessage, ToolCall, ToolResult
    from ctxline.record.store import open_store, put_text

    if step == "runner":
        return _runner(url, size_mb)
    if step == "langgraph":
        return _langgraph(size_mb)
    baseline = rss_mb()
    started = time.perf_counter()
    if step in ("store.append", "pg.append"):
        content = payload(size_mb)
        store = open_store(url)
        store.create_session(SESSION, exist_ok=True)
        put_text(store.blobs, content)
        call = AssistantMessage("", (ToolCall("c1", "build", {"target": "all"}),))
        store.append(SESSION, [call, ToolResult("c1", content, name="build")])
        store.close()
    elif step in ("store.read", "pg.read"):
        store = open_store(url, read_only=True)
        events = store.read(SESSION)
        assert len(events) >= 2
        store.close()
    elif step == "context.prepare":
        from ctxline import Context, PrepareOptions

        store = open_store(url)
        ctx = Context(store, "big", create=False, options=PrepareOptions(context_window=128_000))
        prep = ctx.prepare()
        assert "output shown as a preview" in prep.body_bytes.decode()
        store.close()
    elif step == "create":
        open_store(url).create_session("big")
    elif step == "doctor":
        from ctxline.record.doctor import run_doctor

        report = run_doctor(url)
        assert report.healthy, report.problems
    else:
        raise SystemExit(f"unknown step {step}")
    return {
        "seconds": round(time.perf_counter() - started, 2),
        "baseline_rss_mb": round(baseline, 1),
        "peak_rss_mb": round(vm_hwm_mb(), 1),
    }


def _finish(baseline: float, started: float) -> dict[str, float]:
    return {
        "seconds": round(time.perf_counter() - started, 2),
        "baseline_rss_mb": round(baseline, 1),
        "peak_rss_mb": round(vm_hwm_mb(), 1),
    }


def _runner(url: str, size_mb: int) -> dict[str, float]:
    from ctxline.models.scripted import ScriptedModel
    from ctxline.record.events import ToolResult
    from ctxline.record.store import open_store
    from ctxline.runner import Agent

    def build() -> str:
        """Build every target and print the log."""
        return payload(size_mb)  # made when the tool runs, as a real tool's output is

    script: list[dict[str, object]] = [
        {"tool_calls": [{"id": "c1", "name": "build", "arguments": {}}]},
        {"text": "built"},
    ]
    baseline = rss_mb()
    started = time.perf_counter()
    store = open_store(url)
    agent = Agent(ScriptedModel(script), [build], store=store, session="big")
    result = agent.run("build it")
    assert result.final == "built", result
    stored = [e.event for e in agent.ctx.events if isinstance(e.event, ToolResult)]
    assert len(stored) == 1
    assert len(stored[0].content) == payload_chars(size_mb)
    store.close()
    return _finish(baseline, started)


def _langgraph(size_mb: int) -> dict[str, float]:
    from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    @tool
    def build() -> str:
        """Build every target and print the log."""
        return payload(size_mb)

    def model(state: MessagesState) -> dict[str, list[AnyMessage]]:
        if state["messages"][-1].type == "tool":
            return {"messages": [AIMessage("built")]}
        call = {"id": "c1", "name": "build", "args": {}}
        return {"messages": [AIMessage("", tool_calls=[call])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", model)
    graph.add_node("tools", ToolNode([build]))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    baseline = rss_mb()
    started = time.perf_counter()
    app = graph.compile(checkpointer=InMemorySaver())
    out = app.invoke(
        {"messages": [HumanMessage("build it")]}, {"configurable": {"thread_id": "big"}}
    )
    assert out["messages"][-1].content == "built"
    assert len(out["messages"][-2].content) == payload_chars(size_mb)
    return _finish(baseline, started)


def has_langgraph() -> bool:
    import importlib.util

    return importlib.util.find_spec("langgraph") is not None


# --- the parent side -------------------------------------------------------------------------
# (subprocess, platform and tempfile are imported here, not at the top: a child measured
# for its peak, and the `ctxline append` process that imports vm_hwm_mb from this file,
# must not carry the parent's modules: subprocess alone is 2.4 MB of RSS)


def run_child(step: str, url: str, size_mb: int, session: str = "big") -> dict[str, float]:
    import subprocess

    out = subprocess.run(
        [sys.executable, str(HERE), "--child", step, "--url", url, "--sizes", str(size_mb)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC, "BENCH_LARGE_SESSION": session},
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"{step} failed: {out.stderr[-2000:]}")
    result: dict[str, float] = json.loads(out.stdout.splitlines()[-1])
    return result


def run_cli_append(url: str, size_mb: int, folder: Path) -> dict[str, float]:
    """``ctxline append`` of one JSONL line holding the result; the command's own VmHWM
    (read at exit: a child's ``ru_maxrss`` would count pages shared with this process)."""
    import subprocess

    line = folder / "line.jsonl"
    content = payload(size_mb)
    with line.open("w") as fh:
        fh.write(
            '{"kind": "assistant.message", "text": "", "tool_calls": [{"id": "c2", "name": "build", "arguments": {}}]}\n'
        )
        fh.write('{"kind": "tool.result", "call_id": "c2", "name": "build", "content": ')
        fh.write(json.dumps(content))
        fh.write("}\n")
    del content
    started = time.perf_counter()
    report = folder / "cli-peak.json"
    code = (
        "import atexit, json, sys\n"
        f"sys.path.insert(0, {str(HERE.parent)!r})\n"
        "from bench_large_output import vm_hwm_mb\n"
        f"atexit.register(lambda: open({str(report)!r}, 'w').write(json.dumps(vm_hwm_mb())))\n"
        "from ctxline.cli import main\n"
        "main()\n"
    )
    with line.open("rb") as stdin:
        done = subprocess.run(
            [sys.executable, "-c", code, "append", "--session", "big", "--db", url],
            stdin=stdin,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": SRC},
            check=False,
        )
    if done.returncode != 0:
        raise SystemExit(f"ctxline append failed: {done.stderr.decode()[-2000:]}")
    line.unlink()
    peak = float(json.loads(report.read_text()))
    return {"seconds": round(time.perf_counter() - started, 2), "peak_rss_mb": round(peak, 1)}


def measure(
    size_mb: int, folder: Path, pg: str | None, only: set[str] | None = None
) -> list[dict[str, object]]:
    db = folder / f"large-{size_mb}.db"
    url = str(db)
    rows: list[dict[str, object]] = []
    real = len(payload(size_mb)) / MB

    def wanted(step: str) -> bool:
        return only is None or step in only

    def add(step: str, found: dict[str, float]) -> None:
        ratio = found["peak_rss_mb"] / real
        rows.append(
            {
                "step": step,
                "payload_mb": round(real, 1),
                **found,
                "ratio": round(ratio, 2),
                "under_3x": ratio < 3,
            }
        )

    if wanted("store"):
        add("store.append", run_child("store.append", url, size_mb))
        add("store.read", run_child("store.read", url, size_mb))
        add("doctor", run_child("doctor", url, size_mb))
        add("context.prepare", run_child("context.prepare", url, size_mb))
        rows.append(
            {
                "step": "database",
                "payload_mb": round(real, 1),
                "file_mb": round(db.stat().st_size / MB, 1),
            }
        )
    if wanted("cli"):
        other = folder / f"cli-{size_mb}.db"
        run_child("create", str(other), size_mb)
        add("cli.append", run_cli_append(str(other), size_mb, folder))
    if wanted("runner"):
        runner_db = folder / f"runner-{size_mb}.db"
        add("runner", run_child("runner", str(runner_db), size_mb))
        rows.append(
            {
                "step": "runner.database",
                "payload_mb": round(real, 1),
                "file_mb": round(runner_db.stat().st_size / MB, 1),
            }
        )
        if has_langgraph():
            add("langgraph", run_child("langgraph", "", size_mb))
            seconds = {str(r["step"]): float(str(r["seconds"])) for r in rows if "seconds" in r}
            rows.append(
                {
                    "step": "runner_vs_langgraph",
                    "payload_mb": round(real, 1),
                    "ratio": round(seconds["runner"] / max(seconds["langgraph"], 0.01), 2),
                }
            )
    if pg and wanted("pg"):
        session = f"big-{size_mb}-{time.time_ns()}"
        add("pg.append", run_child("pg.append", pg, size_mb, session))
        add("pg.read", run_child("pg.read", pg, size_mb, session))
    return rows


def main() -> None:
    import platform
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50,200", help="Payload sizes in MB.")
    parser.add_argument("--dir", default=None, help="Where the databases go (a real disk).")
    parser.add_argument("--pg", default=None, help="A PostgreSQL DSN to measure too.")
    parser.add_argument(
        "--only", default=None, help="Comma-separated groups: store,cli,runner,pg (default: all)."
    )
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--url", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.url, int(args.sizes))))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    results: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for size in sizes:
            only = set(args.only.split(",")) if args.only else None
            results += measure(size, Path(tmp), args.pg, only)
    measured = [r for r in results if "under_3x" in r and r["step"] != "langgraph"]
    print(
        json.dumps(
            {
                "benchmark": "large_output",
                "python": platform.python_version(),
                "target": "peak RSS < 3x the payload (ctxline's steps; LangGraph for reference)",
                "all_under_3x": all(bool(r["under_3x"]) for r in measured),
                "results": results,
            }
        )
    )


if __name__ == "__main__":
    main()
