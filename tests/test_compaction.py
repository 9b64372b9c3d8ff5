"""The extractive summary and the digest of a compacted span; the summary lines and the
span fold kept ahead of need give the same texts; the newest group is never cut."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxline.record.events import (
    AssistantMessage,
    Event,
    StoredEvent,
    ToolCall,
    ToolResult,
    UserMessage,
)
from ctxline.tokens.counters import get_counter
from ctxline.view.compaction import digest, extractive_summary

T0 = datetime(2026, 11, 2, tzinfo=UTC)
COUNTER = get_counter("bytes/4")


def stored(events: list[Event]) -> list[StoredEvent]:
    return [StoredEvent(i + 1, f"e{i + 1}", T0, ev) for i, ev in enumerate(events)]


def session(steps: int) -> list[StoredEvent]:
    events: list[Event] = [UserMessage("fix the failing test in src/app.py")]
    for i in range(steps):
        events.append(
            AssistantMessage(
                f"looking at step {i}",
                (ToolCall(f"c{i}", "bash", {"command": f"cat src/mod{i}.py"}),),
            )
        )
        events.append(ToolResult(f"c{i}", f"line one of {i}\nmore", is_error=i % 5 == 0))
    return stored(events)


def test_a_short_span_is_summarized_whole() -> None:
    text = extractive_summary(session(3), 2000, COUNTER)
    lines = text.splitlines()
    assert lines[0].startswith("Summary of record seq 1–7")
    assert lines[1] == "[1] user: fix the failing test in src/app.py"
    assert '[3] bash({"command":"cat src/mod0.py"}) → error: line one of 0' in lines
    assert "omitted" not in text


def test_a_long_span_keeps_the_newest_steps_within_budget() -> None:
    events = session(400)
    text = extractive_summary(events, 300, COUNTER)
    assert COUNTER.count(text) <= 300
    lines = text.splitlines()
    omitted = int(lines[1].split()[1].replace(",", ""))
    kept = lines[2:]
    assert kept[-1].startswith(f"[{events[-1].seq}] bash(")
    total_lines = 1 + 400 * 2  # the task, then an assistant line and a result line per step
    assert omitted + len(kept) == total_lines


def test_digest_counts_tools_and_files() -> None:
    text = digest(session(3), {3: "sha256:" + "a" * 64})
    assert "tools used: bash ×3" in text
    assert "seq 3: sha256:" in text
    assert "src/mod0.py" in text
    assert "src/mod2.py" in text


# --- ahead of need: the summary's lines and the span fold, kept as the record grows -------


def _mixed(n: int, seed: int) -> list[StoredEvent]:
    """A record with messages, calls (ids reused now and then), rules and state."""
    import random

    from ctxline.record.events import Rule, State

    rnd = random.Random(seed)
    events: list[Event] = [UserMessage("the task: fix src/app.py")]
    for i in range(n):
        kind = rnd.choice(["user", "call", "call", "call", "rule", "state", "text"])
        if kind == "user":
            events.append(UserMessage(f"also do {i}"))
        elif kind == "call":
            cid = f"c{rnd.randrange(max(1, i // 3 + 1))}"  # reused ids, as real logs have
            events.append(AssistantMessage("", (ToolCall(cid, "edit", {"path": f"src/m{i % 7}.py"}),)))
            events.append(ToolResult(cid, f"done {i}\nmore", is_error=rnd.random() < 0.2))
        elif kind == "rule":
            events.append(Rule(f"r{i % 3}", rnd.choice(["set", "replace", "revoke"]), text=f"rule {i}"))
        elif kind == "state":
            events.append(State(f"env/s{i % 2}", f"v{i}") if i % 5 else State(f"env/s{i % 2}", cleared=True))
        else:
            events.append(AssistantMessage(f"thinking about {i}"))
    return stored(events)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(0, 120),
    seed=st.integers(0, 10_000),
    budget=st.sampled_from([80, 300, 2_000]),
    cut=st.floats(0, 1),
    keep_share=st.floats(0, 0.3),
)
def test_summary_lines_make_the_extractive_summary_of_the_span(
    n: int, seed: int, budget: int, cut: float, keep_share: float
) -> None:
    from ctxline.view.compaction import SummaryLines

    events = _mixed(n, seed)
    upto = max(1, int(len(events) * cut))
    users = [e.seq for e in events[:upto] if isinstance(e.event, UserMessage)]
    keep = users[: 1 + int(len(users) * keep_share)]
    lines = SummaryLines()
    lines.advance(events, len(events), COUNTER)  # ahead of the cut, as a step does
    span = [e for e in events[:upto] if e.seq not in keep]
    assert lines.summary(events, upto, keep, budget, COUNTER) == extractive_summary(span, budget, COUNTER)


def test_summary_lines_make_only_the_lines_a_summary_reaches() -> None:
    """Noting 600 events makes no text; a summary makes its kept lines and the one that
    did not fit, newest first, and the same summary again makes nothing more."""
    from ctxline.view.compaction import SummaryLines

    events = _mixed(600, 7)
    lines = SummaryLines()
    lines.advance(events, len(events), COUNTER)
    assert len(lines.texts) > 300
    assert all(text is None for text in lines.texts)
    text = lines.summary(events, len(events), [], 300, COUNTER)
    made = [j for j, t in enumerate(lines.texts) if t is not None]
    kept = text.count("\n") - 1  # the head and the omitted-steps marker are no lines
    assert made == list(range(len(lines.texts) - kept - 1, len(lines.texts)))
    assert lines.summary(events, len(events), [], 300, COUNTER) == text
    assert [j for j, t in enumerate(lines.texts) if t is not None] == made


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 300), seed=st.integers(0, 10_000), cuts=st.lists(st.floats(0, 1), min_size=1, max_size=4))
def test_a_span_fold_ahead_of_the_cut_goes_back_to_it(n: int, seed: int, cuts: list[float]) -> None:
    from ctxline.view.compaction import SpanFold

    events = _mixed(n, seed)
    ahead = SpanFold().advance(events, len(events))
    for share in cuts:
        upto = max(1, int(len(events) * share))
        fresh = SpanFold().advance(events, upto)
        ahead.advance(events, upto)
        assert ahead.digest({}) == fresh.digest({})
        assert ahead.reaffirm() == fresh.reaffirm()
        ahead.advance(events, len(events))


def test_plan_compaction_keeps_the_newest_group_even_over_its_budget() -> None:
    from ctxline.render.neutral import history_to_messages
    from ctxline.view.compaction import plan_compaction
    from ctxline.view.measure import ViewMessage

    events = session(30)
    messages, _ = history_to_messages(events)
    view = [ViewMessage(m, 5_000 if m.seq >= events[-2].seq else 50) for m in messages]
    reduction = plan_compaction(
        view, events, fixed_tokens=500, target=3_000, counter=COUNTER, summary_tokens=400, previous_upto=0
    )
    assert reduction is not None
    assert reduction.upto_seq < events[-2].seq  # the newest call and its result stay
    assert reduction.keep == (1,)  # and the task
