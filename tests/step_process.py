"""A worker for the atomic-step test: appends agent steps and prepares each request, forever.

Usage: python step_process.py DB SESSION

It prints ``step <n>`` after each logged request, so the parent can kill it at any
moment: between its appends, inside a prepare, during a reduction.
"""

from __future__ import annotations

import sys

from ctxline import (
    AssistantMessage,
    Context,
    PrepareOptions,
    SQLiteStore,
    ToolCall,
    ToolResult,
    UserMessage,
)
from ctxline.sources.status import StatusConfig


def main() -> None:
    db, session = sys.argv[1], sys.argv[2]
    store = SQLiteStore(db, check=False)
    options = PrepareOptions(context_window=4_000, max_output=500, tokenizer="bytes/4")
    ctx = Context(store, session, options=options, status=StatusConfig(), status_mode="append")
    n = len(ctx.requests())
    if n == 0:
        ctx.append(UserMessage("the original task"))
    while True:
        n += 1
        ctx.append(
            AssistantMessage(f"step {n}", (ToolCall(f"c{n}", "bash", {"command": f"ls {n % 4}"}),)),
            ToolResult(f"c{n}", "\n".join(f"row {n} {j} " + "y" * 30 for j in range(40 + n % 7))),
        )
        ctx.prepare()
        print(f"step {n}", flush=True)


if __name__ == "__main__":
    main()
