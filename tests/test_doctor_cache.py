"""``ctxline doctor --cache`` on real Claude Code transcripts (the bundled one and ../shared/data)
and on small ones written here for each cause: every miss gets a cause, a cost, and the
figures agree with the importer's."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

from click.testing import CliRunner

from conftest import REPO
from ctxline.cachecheck import CAUSES, check_path
from ctxline.cachecheck.analyze import check_file
from ctxline.cli import main
from ctxline.importers import load
from ctxline.pricing import MILLION, price_for
from ctxline.record.events import AssistantMessage
from ctxline.record.jsonvalue import JsonObject, JsonValue, as_object

BUNDLED = REPO / "examples" / "data" / "claude-code" / "short.jsonl"


def test_the_bundled_session_lists_its_cold_start_with_a_cause() -> None:
    result = CliRunner().invoke(main, ["doctor", "--cache", str(BUNDLED)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"ctxline doctor --cache: {BUNDLED}"
    assert "1 calls · cache hit rate 45.4% of input tokens · 0 misses" in lines[1]
    assert "cold-start: the first call in this log" in lines[-1]
    data = json.loads(
        CliRunner().invoke(main, ["doctor", "--cache", str(BUNDLED), "--json"]).output
    )
    (row,) = data["rows"]
    assert (row["cache_read"], row["cache_write_1h"], row["uncached"], row["output"]) == (
        11_515,
        13_835,
        3,
        13,
    )
    assert row["cause"] == "cold-start"
    price = price_for("claude-opus-4-6")
    assert price is not None
    assert price.cache_write_1h is not None
    expected = (
        3 * price.input
        + 13 * price.output
        + 11_515 * price.cache_read
        + 13_835 * price.cache_write_1h
    ) / MILLION
    assert Decimal(row["cost_usd"]) == expected


def importer_usage(path: Path) -> list[JsonObject]:
    sessions = load(path)
    main_session = sessions[0]
    return [
        as_object(p.event.meta["usage"], "usage")
        for p in main_session.events
        if isinstance(p.event, AssistantMessage) and "usage" in p.event.meta
    ]


def test_every_miss_in_the_real_transcripts_has_a_cause(data_dir: Path) -> None:
    folder = data_dir / "claude-code"
    expected = {
        "258c7280-ae70-4798-800f-63464d01a85d.jsonl": [
            "cold-start",
            "new-turn",
            "compaction",
            "new-turn",
        ],
        "4d5611e5-241a-462a-8d15-5122611a9569.jsonl": [
            "cold-start",
            "expired",
            "compaction",
            "expired",
            "new-turn",
        ],
        "tool_heavy.jsonl": ["cold-start", "outside-log"],
    }
    for report in check_path(folder):
        assert report.rows
        for row in report.misses:
            assert row.cause in CAUSES
            if row.status == "miss":
                assert row.lost == row.expected_read - row.cache_read > 0
                assert row.miss_cost is not None
                assert row.miss_cost > 0
        name = Path(report.source).name
        if name in expected:
            assert [r.cause for r in report.misses] == expected[name], name
            # the call figures are the importer's, summed per call
            usage = importer_usage(Path(report.source))
            assert [u.get("cache_read_input_tokens", 0) for u in usage] == [
                r.cache_read for r in report.rows
            ]
            assert [u.get("input_tokens", 0) for u in usage] == [r.uncached for r in report.rows]
    big = check_file(folder / "258c7280-ae70-4798-800f-63464d01a85d.jsonl")
    assert big.hit_rate > 0.96  # REFERENCES.md: 96-98.6 % of input tokens were cache reads
    compaction = next(r for r in big.rows if r.cause == "compaction")
    assert compaction.cache_read == 21_460  # the system + tools prefix stayed cached
    tool_heavy = check_file(folder / "tool_heavy.jsonl")
    assert "/mcp" in tool_heavy.misses[-1].first_difference


# --- small transcripts, one per cause ------------------------------------------------


class Transcript:
    """Writes Claude Code records with a parentUuid chain."""

    def __init__(self) -> None:
        self.records: list[JsonObject] = []
        self.last: str | None = None
        self.minute = 0

    def _add(self, rec: JsonObject, parent: str | None = "last") -> str:
        uid = f"u{len(self.records) + 1}"
        rec = {
            "uuid": uid,
            "parentUuid": self.last if parent == "last" else parent,
            "sessionId": "s",
            "timestamp": f"2026-02-10T10:{self.minute:02d}:00.000Z",
            **rec,
        }
        self.records.append(rec)
        self.last = uid
        return uid

    def user(self, text: str, parent: str | None = "last") -> str:
        return self._add({"type": "user", "message": {"role": "user", "content": text}}, parent)

    def call(
        self,
        read: int,
        write: int,
        *,
        model: str = "claude-sonnet-4-5",
        text: str = "ok",
        thinking: bool = False,
        minutes: int = 1,
    ) -> str:
        self.minute += minutes
        content: list[JsonValue] = (
            [{"type": "thinking", "thinking": "hmm"}] if thinking else []
        )
        content.append({"type": "text", "text": text})
        usage: JsonObject = {
            "input_tokens": 5,
            "output_tokens": 7,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": write,
        }
        return self._add(
            {
                "type": "assistant",
                "message": {
                    "id": f"m{len(self.records)}",
                    "model": model,
                    "role": "assistant",
                    "content": content,
                    "usage": usage,
                },
            }
        )

    def boundary(self) -> None:
        self._add(
            {
                "type": "system",
                "subtype": "compact_boundary",
                "compactMetadata": {"trigger": "auto"},
            },
            None,
        )

    def write(self, path: Path) -> Path:
        path.write_text("".join(json.dumps(r) + "\n" for r in self.records))
        return path


def causes(t: Transcript, tmp_path: Path) -> list[str]:
    return [r.cause for r in check_file(t.write(tmp_path / "t.jsonl")).misses]


def test_each_cause(tmp_path: Path) -> None:
    t = Transcript()  # hits only
    t.user("hi")
    t.call(0, 1000)
    t.user("more")
    t.call(1000, 50)
    assert causes(t, tmp_path) == ["cold-start"]

    t.user("and a model change")
    t.call(0, 1100, model="claude-haiku-4-5")
    assert causes(t, tmp_path)[-1] == "model"

    t = Transcript()
    t.user("Today is 2026-02-10 10:00:00")
    t.call(0, 1000)
    t.user("x")
    t.call(900, 200)  # read less than expected: the log shows no change, nothing else explains it
    assert causes(t, tmp_path)[-1] == "outside-log"

    t = Transcript()
    t.user("Today is 2026-02-10 10:00:00")
    t.call(0, 1000)
    t.user("Today is 2026-02-10 10:05:00", parent=None)  # the first block was re-rendered
    t.call(100, 1000)
    assert causes(t, tmp_path)[-1] == "timestamp"

    t = Transcript()
    t.user("one")
    t.user("two")
    t.call(0, 1000)
    t.last = None
    t.user("two")
    t.user("one")
    t.call(100, 1000)
    assert causes(t, tmp_path)[-1] == "reorder"

    t = Transcript()
    root = t.user("fix the bug")
    t.call(0, 1000)
    t.user("use approach A")
    t.call(1000, 100)
    t.user("use approach B instead", parent=root)  # a rewind: the chain branches at the root
    t.call(500, 600)
    assert causes(t, tmp_path)[-1] == "history"

    t = Transcript()
    t.user("go")
    t.call(0, 1000)
    t.user("go on")
    t.call(0, 1100)  # nothing read at all within the cache's lifetime
    assert causes(t, tmp_path)[-1] == "system-or-tools"

    t = Transcript()
    t.user("go")
    t.call(0, 1000)
    t.user("after lunch")
    t.call(0, 1100, minutes=40)
    assert causes(t, tmp_path)[-1] == "expired"

    t = Transcript()
    t.user("go")
    t.call(0, 1000, thinking=True)
    t.user("next task")
    t.call(200, 900, thinking=True)
    assert causes(t, tmp_path)[-1] == "new-turn"

    t = Transcript()
    t.user("go")
    t.call(0, 5000)
    t.boundary()
    t.user("summary of the conversation")
    t.call(200, 900)
    assert causes(t, tmp_path)[-1] == "compaction"


def test_html_and_prices(tmp_path: Path) -> None:
    t = Transcript()
    t.user("go <script>alert(1)</script>")
    t.call(0, 1000, model="my-local-model")
    t.user("more")
    t.call(0, 1100, model="my-local-model")
    path = t.write(tmp_path / "session.jsonl")
    html = tmp_path / "cache.html"
    result = CliRunner().invoke(main, ["doctor", "--cache", str(path), "--html", str(html)])
    assert result.exit_code == 0, result.output
    assert "no price for my-local-model" in result.output
    assert "no price" in result.output.splitlines()[-2]
    page = html.read_text()
    assert page.count('class="mark-break"') == 1
    assert "<script>" not in page
    prices = tmp_path / "prices.json"
    prices.write_text(
        json.dumps(
            {
                "models": [
                    {
                        "model": "my-local-model",
                        "provider": "local",
                        "input": "1",
                        "output": "2",
                        "cache_read": "0.1",
                        "cache_write": "1.25",
                        "as_of": "2026-01-01",
                        "source": "https://example.invalid/prices",
                    }
                ]
            }
        )
    )
    data = json.loads(
        CliRunner()
        .invoke(main, ["doctor", "--cache", str(path), "--json", "--prices", str(prices)])
        .output
    )
    miss = data["rows"][1]
    assert miss["cause"] == "system-or-tools"
    assert (
        Decimal(miss["miss_cost_usd"])
        == Decimal(1000) * (Decimal("1.25") - Decimal("0.1")) / MILLION
    )


def test_bad_input_is_one_line_with_the_line_number(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "user", "message": {"content": "hi"}}\nnot json\n')
    result = CliRunner().invoke(main, ["doctor", "--cache", str(bad)])
    assert result.exit_code == 2
    assert f"{bad}, line 2: not valid JSON" in result.output
    negative = tmp_path / "neg.jsonl"
    negative.write_text(
        json.dumps(
            {
                "type": "assistant",
                "message": {"id": "m", "content": [], "usage": {"input_tokens": -1}},
            }
        )
        + "\n"
    )
    result = CliRunner().invoke(main, ["doctor", "--cache", str(negative)])
    assert result.exit_code == 2
    assert "line 1" in result.output
    assert "message.usage.input_tokens" in result.output
    result = CliRunner().invoke(main, ["doctor", "--html", str(tmp_path / "x.html")])
    assert result.exit_code == 2
    assert "go with --cache" in result.output
