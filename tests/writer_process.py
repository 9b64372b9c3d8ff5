"""A writer process for the crash and race tests: appends forever, printing each ack.

Usage: python writer_process.py DB SESSION WORKER [--expected] [--count=N] [--start-at=EPOCH]

Each acknowledged append prints one line ``ack <seq> <id>`` and flushes, so the parent
knows exactly what was acknowledged before it killed the process. With
``--expected`` the writer reads the head and appends with ``expected_seq``, counting
conflicts (printed as ``conflict <expected> <actual>``) and retrying.
"""

from __future__ import annotations

import sys
import time

from ctxline.errors import Conflict
from ctxline.record.events import Pending, UserMessage
from ctxline.record.store import SQLiteStore


def main() -> None:
    db, session, worker = sys.argv[1], sys.argv[2], sys.argv[3]
    use_expected = "--expected" in sys.argv
    limit = next((int(a.split("=", 1)[1]) for a in sys.argv if a.startswith("--count=")), None)
    start_at = next(
        (float(a.split("=", 1)[1]) for a in sys.argv if a.startswith("--start-at=")), None
    )
    store = SQLiteStore(db, check=False)
    store.create_session(session, exist_ok=True)
    if start_at is not None:  # line the racing writers up on one start time
        time.sleep(max(0.0, start_at - time.time()))
    n = 0
    while limit is None or n < limit:
        n += 1
        batch = [
            Pending(UserMessage(f"{worker}:{n}:{i}"), id=f"{worker}-{n}-{i}") for i in range(3)
        ]
        if use_expected:
            head = store.head(session)
            try:
                stored = store.append(session, batch, expected_seq=head)
            except Conflict as exc:
                print(f"conflict {exc.expected} {exc.actual}", flush=True)
                n -= 1
                continue
        else:
            stored = store.append(session, batch)
        for ev in stored:
            sys.stdout.write(f"ack {ev.seq} {ev.id}\n")
        sys.stdout.flush()
    store.close()


if __name__ == "__main__":
    main()
