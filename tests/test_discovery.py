"""Tool discovery: search, both modes through the runner, what the model saw, rung 3."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxline import MemoryStore, SQLiteStore
from ctxline.context import Context
from ctxline.discovery import CALL_TOOL, SEARCH_TOOLS, Catalog, Discovery, load_catalog, problems
from ctxline.errors import ValidationError
from ctxline.models.scripted import ScriptedModel
from ctxline.record.events import (
    AssistantMessage,
    RequestHeader,
    ToolCall,
    ToolResult,
    Tools,
    UserMessage,
)
from ctxline.record.jsonvalue import JsonValue, as_object
from ctxline.render.neutral import ToolSpec
from ctxline.runner import Agent, ToolRegistry, tool
from ctxline.view.options import PrepareOptions
from json_reads_b import at, at_array, at_object

CATALOG = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "mcp_catalog.json"


@tool(tags=("git",), group="git")
def git_status(repo_path: str) -> str:
    """Show the working tree status of a git repository."""
    return f"clean: {repo_path}"


@tool(tags=("git",), group="git", max_calls=1)
def git_commit(repo_path: str, message: str) -> str:
    """Record changes to the repository with a commit message."""
    return f"committed {message!r}"


@tool(tags=("jira",), group="jira")
def jira_get_issue(issue_key: str) -> str:
    """Get a Jira issue by its key."""
    return f"{issue_key}: open"


@tool
def read_notes() -> str:
    """Read the user's notes (a core tool)."""
    return "notes"


def calls(*items: tuple[str, str, JsonValue]) -> dict[str, JsonValue]:
    return {"tool_calls": [{"id": i, "name": n, "arguments": a} for i, n, a in items]}


def results(agent: Agent) -> dict[str, ToolResult]:
    return {e.event.call_id: e.event for e in agent.ctx.events if isinstance(e.event, ToolResult)}


def tool_names(agent: Agent) -> list[list[str]]:
    """The tools array of every logged request, in order (from the record)."""
    out, current = [], []
    for e in agent.ctx.events:
        if isinstance(e.event, Tools):
            current = [str(t["name"]) for t in e.event.tools]
        if isinstance(e.event, RequestHeader):
            out.append(current)
    return out


def break_section(header: RequestHeader) -> str | None:
    first = at_object(header.report, "prefix").get("first_difference") or {}
    assert isinstance(first, dict)
    section = first.get("section")
    assert section is None or isinstance(section, str)
    return section


def discoverable() -> ToolRegistry:
    return ToolRegistry([git_status, git_commit, jira_get_issue])


def test_search_ranks_names_tags_parameters_and_descriptions() -> None:
    catalog = Catalog.of(discoverable())
    assert catalog.search("status")[0].name == "git_status"
    assert catalog.search("issue key")[0].name == "jira_get_issue"
    assert catalog.search("commit message")[0].name == "git_commit"
    assert catalog.search("jira")[0].name == "jira_get_issue"  # the tag and group count
    assert catalog.search("kubernetes pods") == []
    assert [h.name for h in catalog.search("git", tags=("jira",))] == []
    with pytest.raises(ValidationError, match="no words"):
        catalog.search("?!")
    assert catalog.nearest("git_stats")[0] == "git_status"
    assert "getIssue" in Catalog.of([ToolSpec("getIssue", "x")]).nearest("get_issue")


def test_the_real_mcp_catalog_is_large_and_finds_what_a_coder_needs() -> None:
    catalog = load_catalog(CATALOG)
    assert len(catalog) >= 100
    data = json.loads(CATALOG.read_text())
    assert all((CATALOG.parent / s["license_file"]).is_file() for s in data["servers"])
    assert catalog.search("git diff unstaged changes")[0].name.startswith("git_diff")
    assert "time" in catalog.search("current time in a timezone")[0].name
    top = [h.name for h in catalog.search("create jira issue", 3)]
    assert any("create_issue" in n for n in top), top


def test_schema_validation_names_every_wrong_field() -> None:
    schema = git_commit.spec.parameters
    assert problems({"repo_path": "/r", "message": "m"}, schema) == []
    found = problems({"repo_path": 3, "oops": True}, schema)
    assert "repo_path: expected string, got integer" in found
    assert "message: required, missing" in found
    assert any(p.startswith("oops: not a parameter") for p in found)
    nested: dict[str, JsonValue] = {
        "type": "object",
        "properties": {"xs": {"type": "array", "items": {"$ref": "#/$defs/n"}, "maxItems": 2}},
        "$defs": {"n": {"type": "integer", "minimum": 0}},
    }
    assert problems({"xs": [1, -1, 2]}, nested) == [
        "xs: allows at most 2 items, got 3",
        "xs[1]: must be >= 0, got -1",
    ]
    assert (
        problems(
            {"k": None}, {"properties": {"k": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}
        )
        == []
    )


def test_cache_stable_mode_keeps_the_tools_array_and_dispatches_through_call_tool() -> None:
    script = ScriptedModel(
        [
            calls(("s1", SEARCH_TOOLS, {"query": "git status"})),
            # the same reply cannot call what its search reveals: the model had not seen it
            calls(
                ("c1", CALL_TOOL, {"name": "git_status", "arguments": {"repo_path": "/repo"}}),
                ("c2", CALL_TOOL, {"name": "git_status", "arguments": {"repo": "/repo"}}),
                ("c3", CALL_TOOL, {"name": "jira_get_issue", "arguments": {"issue_key": "A-1"}}),
                ("c4", "git_status", {"repo_path": "/repo"}),
                ("c5", CALL_TOOL, {"name": "git_stats", "arguments": {}}),
            ),
            {"text": "done"},
        ]
    )
    agent = Agent(
        script,
        [read_notes],
        store=MemoryStore(),
        session="cs",
        discovery=Discovery(discoverable(), reveal=2),
    )
    result = agent.run("status?")
    assert result.final == "done"
    got = results(agent)
    assert at(got["s1"].meta, "discovery", "revealed", 0) == "git_status"
    assert '"name":"git_status"' in got["s1"].content  # the schema came with the result
    assert got["c1"].content == "clean: /repo"
    assert not got["c1"].is_error
    assert got["c1"].meta["discovery"] == {"tool": "git_status"}
    assert got["c2"].is_error
    assert "repo_path: required, missing" in got["c2"].content
    assert "not a parameter" in got["c2"].content
    assert "schema of 'git_status'" in got["c2"].content
    assert got["c3"].is_error
    assert "not among the tools you were shown" in got["c3"].content
    assert got["c4"].is_error
    assert 'call_tool(name="git_status"' in got["c4"].content
    assert got["c5"].is_error
    assert "nearest tools: git_status" in got["c5"].content
    arrays = tool_names(agent)
    assert len({tuple(a) for a in arrays}) == 1  # never changed
    assert "git_status" not in arrays[0]
    assert {SEARCH_TOOLS, CALL_TOOL, "read_notes"} <= set(arrays[0])
    headers = [e.event for e in agent.ctx.events if isinstance(e.event, RequestHeader)]
    assert all(break_section(h) != "tools" for h in headers)
    assert at(headers[-1].inputs, "meta", "discovery", "revealed") == ["git_status", "git_commit"]


def test_a_call_before_its_reveal_was_seen_is_refused() -> None:
    script = ScriptedModel(
        [
            calls(
                ("s1", SEARCH_TOOLS, {"query": "git status"}),
                ("c1", CALL_TOOL, {"name": "git_status", "arguments": {"repo_path": "/r"}}),
            ),
            {"text": "ok"},
        ]
    )
    agent = Agent(
        script, [], store=MemoryStore(), session="early", discovery=Discovery(discoverable())
    )
    agent.run("go")
    got = results(agent)
    assert got["c1"].is_error
    assert "not among the tools you were shown" in got["c1"].content
    assert "clean" not in got["c1"].content


def test_native_mode_reveals_into_the_tools_array_once_per_search() -> None:
    script = ScriptedModel(
        [
            calls(("s1", SEARCH_TOOLS, {"query": "git status", "limit": 1})),
            calls(
                ("c1", "git_status", {"repo_path": "/r"}),
                ("c2", "jira_get_issue", {"issue_key": "A"}),
            ),
            calls(("s2", SEARCH_TOOLS, {"query": "commit", "limit": 1})),
            calls(("c3", "git_commit", {"repo_path": "/r", "message": "m"})),
            calls(("c4", "git_commit", {"repo_path": "/r", "message": "again"})),
            {"text": "done"},
        ]
    )
    agent = Agent(
        script,
        [read_notes],
        store=MemoryStore(),
        session="nat",
        discovery=Discovery(discoverable(), mode="native"),
    )
    agent.run("go")
    got = results(agent)
    assert got["c1"].content == "clean: /r"
    assert got["c2"].is_error
    assert "search_tools reveals it" in got["c2"].content
    assert got["c3"].content == "committed 'm'"
    assert got["c4"].is_error
    assert "(1/1 max)" in got["c4"].content  # max_calls of the revealed tool
    arrays = tool_names(agent)
    assert "git_status" not in arrays[0]
    assert "git_status" in arrays[1]
    assert "git_commit" not in arrays[1]
    assert "git_commit" in arrays[3]
    headers = [e.event for e in agent.ctx.events if isinstance(e.event, RequestHeader)]
    breaks = [break_section(h) for h in headers]
    assert breaks.count("tools") == 2  # one per search that revealed something


def test_what_was_revealed_survives_a_resume(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    first = Agent(
        ScriptedModel([calls(("s1", SEARCH_TOOLS, {"query": "git status"}))]),
        [],
        store=SQLiteStore(db),
        session="res",
        discovery=Discovery(discoverable()),
    )
    first.start("go")
    first.step()  # the search ran and was recorded; the process "dies" here
    first.close()
    first.store.close()
    later = ScriptedModel(
        [
            {},
            calls(("c1", CALL_TOOL, {"name": "git_status", "arguments": {"repo_path": "/x"}})),
            {"text": "ok"},
        ]
    )
    second = Agent(
        later, [], store=SQLiteStore(db), session="res", discovery=Discovery(discoverable())
    )
    second.resume()
    assert results(second)["c1"].content == "clean: /x"
    second.store.close()


def test_rung_3_drops_unused_revealed_schemas_and_never_the_forced_one() -> None:
    big = [
        ToolSpec(
            f"tool_{i}",
            f"Does thing number {i}. " + "detail " * 400,
            {"type": "object", "properties": {"x": {"type": "string"}}},
        )
        for i in range(6)
    ]
    discovery = Discovery(Catalog.of(big), mode="native", reveal=6, keep_recent=1)
    store = MemoryStore()
    ctx = Context(
        store,
        "r3",
        sources=[discovery],
        # defer=False: reduce at the pressure line (the cost-aware ladder would wait here,
        # the extra reads costing less than rewriting the tools array)
        options=PrepareOptions(
            context_window=4000, max_output=500, tokenizer="o200k_base", defer=False
        ),
    )
    ctx.append(
        UserMessage("find tools"),
        AssistantMessage("", (ToolCall("s", SEARCH_TOOLS, {"query": "thing"}),)),
    )
    outcome = ctx.call_tool(ToolCall("s", SEARCH_TOOLS, {"query": "thing"}))
    assert outcome is not None
    ctx.record_outcome(ToolCall("s", SEARCH_TOOLS, {"query": "thing"}), outcome)
    fold = ctx.fold("discovery")
    revealed = discovery.offered(fold)  # type: ignore[arg-type]
    ctx.set_tools(revealed, optional=discovery.optional(fold))  # type: ignore[arg-type]
    prep = ctx.prepare(tool_choice="tool_3")
    actions = [as_object(a) for a in at_array(prep.report.to_json(), "actions")]
    drops = [a for a in actions if a["action"] == "drop_tools"]
    assert drops, prep.report.to_json()["actions"]
    shown = [t["function"]["name"] for t in prep.body["tools"]]
    assert "tool_3" in shown  # forced: never dropped
    top = fold.revealed and next(iter(fold.revealed))  # type: ignore[attr-defined]
    assert top in shown  # the best hit is kept until the model's next reply
    assert set(at_array(drops[0], "items")) & {f"tool_{i}" for i in range(6)}
    assert not set(at_array(drops[0], "items")) & set(shown)
    assert prep.report.tokens.total <= ctx.options.target_line
    # the cut stays: the next step offers the same (reduced) set, no new tools event
    fold = ctx.fold("discovery")
    ctx.set_tools(discovery.offered(fold), optional=discovery.optional(fold))  # type: ignore[arg-type]
    again = ctx.prepare(tool_choice="tool_3")
    assert [t["function"]["name"] for t in again.body["tools"]] == shown
    assert (
        again.report.prefix.first_difference is None
        or again.report.prefix.first_difference.section == "tail"
    )
    for step in (1, 2):
        assert ctx.rebuild(step) == (prep if step == 1 else again).body_bytes


def test_after_a_compaction_the_revealed_tools_are_reaffirmed() -> None:
    discovery = Discovery(discoverable(), reveal=2)
    store = MemoryStore()
    ctx = Context(store, "cmp", sources=[discovery])
    ctx.append(UserMessage("check the repo"))
    call = ToolCall("s", SEARCH_TOOLS, {"query": "git status"})
    ctx.append(AssistantMessage("", (call,)))
    outcome = ctx.call_tool(call)
    assert outcome is not None
    ctx.record_outcome(call, outcome)
    for i in range(6):
        ctx.append(UserMessage(f"more {i} " + "words " * 300))
    assert ctx.compact(target=300) is not None
    prep = ctx.prepare()
    text = "\n".join(str(m.get("content")) for m in prep.body["messages"])
    reaffirm = text[text.index("<ctx-reaffirm>") : text.index("</ctx-reaffirm>")]
    assert '<ctx-tools-revealed via="call_tool(name, arguments)">' in reaffirm
    assert "- git_status: Show the working tree status" in reaffirm
    assert '"parameters"' not in reaffirm  # names and one line, not the schemas again
    assert (
        Context(store, "cmp", sources=[Discovery(discoverable(), reveal=2)]).rebuild(
            prep.header.step
        )
        == prep.body_bytes
    )


def test_one_sessions_reveals_are_not_anothers() -> None:
    store = MemoryStore()
    searcher = Agent(
        ScriptedModel([calls(("s", SEARCH_TOOLS, {"query": "git status"})), {"text": "ok"}]),
        [],
        store=store,
        session="a",
        discovery=Discovery(discoverable()),
    )
    searcher.run("find it")
    other = Agent(
        ScriptedModel(
            [
                calls(("c", CALL_TOOL, {"name": "git_status", "arguments": {"repo_path": "/r"}})),
                {"text": "ok"},
            ]
        ),
        [],
        store=store,
        session="b",
        discovery=Discovery(discoverable()),
    )
    other.run("use it")
    refused = results(other)["c"]
    assert refused.is_error
    assert "search_tools reveals it" in refused.content
