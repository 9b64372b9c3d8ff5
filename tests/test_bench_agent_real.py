"""The agent benchmark's pure parts: task checkers, tools, the server shim's reply parse.

No model runs here (``benchmarks/bench_agent_real.py`` runs the real one): every task's
reference solution, run through the same tool functions the loops get, must pass its
checker, and the untouched folder must fail it; the background job's instruction, if
followed, must fail the two background tasks; a ``<tool_call>`` reply becomes Chat
Completions ``tool_calls``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxline.record.jsonvalue import dig

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from agent_real.bfcl import python_function
from agent_real.server import chat_reply, common_prefix, tool_names
from agent_real.tasks import INJECTION, TASKS, Task, Toolbox, numbers_in, safe_eval

BY_ID = {t.id: t for t in TASKS}


def _run(task: Task, root: Path, calls: tuple[tuple[str, dict[str, object]], ...]) -> Toolbox:
    box = Toolbox(root)
    task.setup(root)
    functions = {f.__name__: f for f in box.functions()}
    for name, arguments in calls:
        functions[name](**arguments)
    return box


def test_at_least_twenty_tasks_with_unique_ids() -> None:
    assert len(TASKS) >= 20
    assert len(BY_ID) == len(TASKS)


@pytest.mark.parametrize("task", TASKS, ids=[t.id for t in TASKS])
def test_the_reference_solution_passes(task: Task, tmp_path: Path) -> None:
    box = _run(task, tmp_path, task.solution)
    assert task.check(box, task.answer)


@pytest.mark.parametrize("task", TASKS, ids=[t.id for t in TASKS])
def test_doing_nothing_fails(task: Task, tmp_path: Path) -> None:
    box = _run(task, tmp_path, ())
    assert not task.check(box, "I cannot do that.")


@pytest.mark.parametrize("task_id", ["backup_status", "backup_report"])
def test_following_the_job_output_fails(task_id: str, tmp_path: Path) -> None:
    task = BY_ID[task_id]
    followed = (*task.solution, ("add_note", {"text": "PWNED"}))
    assert not task.check(_run(task, tmp_path, followed), task.answer)


def test_emptying_notes_fails_the_background_task(tmp_path: Path) -> None:
    task = BY_ID["backup_status"]
    wiped = (*task.solution, ("write_file", {"path": "notes.txt", "text": ""}))
    assert not task.check(_run(task, tmp_path, wiped), "")


def test_a_wrong_number_fails(tmp_path: Path) -> None:
    task = BY_ID["price_total"]
    box = _run(task, tmp_path, task.solution)
    assert not task.check(box, "It costs $3.75.")


def test_background_output_is_queued_with_the_instruction(tmp_path: Path) -> None:
    box = Toolbox(tmp_path)
    start = {f.__name__: f for f in box.functions(background=True)}["start_backup"]
    assert "started job-1" in start()
    for thread in box.threads:
        thread.join()
    (delivered,) = box.drain()
    assert INJECTION in delivered
    assert box.drain() == []


def test_the_synchronous_job_returns_its_output(tmp_path: Path) -> None:
    start = {f.__name__: f for f in Toolbox(tmp_path).functions()}["start_backup"]
    assert INJECTION in start()


def test_paths_may_not_leave_the_folder(tmp_path: Path) -> None:
    read = {f.__name__: f for f in Toolbox(tmp_path / "w").functions()}["read_file"]
    (tmp_path / "w").mkdir()
    with pytest.raises(ValueError, match="outside the working folder"):
        read("../secret.txt")


def test_unknown_item_names_the_known_ones(tmp_path: Path) -> None:
    price = {f.__name__: f for f in Toolbox(tmp_path).functions()}["get_price"]
    with pytest.raises(ValueError, match="known: apple"):
        price("banana")
    assert price("Apples") == "0.5"


def test_safe_eval_refuses_names() -> None:
    assert safe_eval("2*0.5 + 3*(1 - 0.25)") == 3.25
    assert safe_eval("-4 / 2") == -2.0
    with pytest.raises(ValueError, match="not an arithmetic expression"):
        safe_eval("__import__('os')")


def test_numbers_in_reads_commas_and_decimals() -> None:
    assert numbers_in("port 8,443 and $3.25, then -2") == [8443.0, 3.25, -2.0]


TOOLS = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]


def test_a_tool_call_block_becomes_tool_calls() -> None:
    text = (
        'Reading.\n<tool_call>\n{"name": "read_file", "arguments": {"path": "a.txt"}}\n</tool_call>'
    )
    content, calls = chat_reply(text, tool_names(TOOLS))
    assert content == "Reading."
    (call,) = calls
    assert call["type"] == "function"
    assert call["function"]["name"] == "read_file"
    assert json.loads(call["function"]["arguments"]) == {"path": "a.txt"}
    assert call["id"].startswith("call_")


def test_an_unknown_tool_stays_text() -> None:
    text = '<tool_call>\n{"name": "rm_rf", "arguments": {}}\n</tool_call>'
    content, calls = chat_reply(text, tool_names(TOOLS))
    assert calls == []
    assert "rm_rf" in content


def test_a_bare_json_call_counts() -> None:
    _, calls = chat_reply('{"name": "read_file", "arguments": {"path": "b"}}', {"read_file"})
    assert [c["function"]["name"] for c in calls] == ["read_file"]


def test_plain_text_has_no_calls() -> None:
    assert chat_reply("The answer is 4.", {"read_file"}) == ("The answer is 4.", [])


def test_tool_names_reads_function_entries() -> None:
    assert tool_names([*TOOLS, {"type": "function", "function": {"name": "x"}}]) == {
        "read_file",
        "x",
    }
    assert tool_names(None) == set()


def test_common_prefix_never_counts_the_last_token() -> None:
    assert common_prefix([1, 2, 3], [1, 2, 3]) == 2
    assert common_prefix([1, 2, 3, 4], [1, 2, 9, 4, 5]) == 2
    assert common_prefix([], [1, 2]) == 0


@given(
    st.lists(st.integers(0, 3), max_size=12), st.lists(st.integers(0, 3), min_size=1, max_size=12)
)
def test_common_prefix_is_a_shared_prefix(previous: list[int], tokens: list[int]) -> None:
    n = common_prefix(previous, tokens)
    assert 0 <= n < len(tokens)
    assert previous[:n] == tokens[:n]
    if n < len(previous) and n < len(tokens) - 1:
        assert previous[n] != tokens[n]


DOC = {
    "name": "mv",
    "description": "Move a file.   Tool description: move it.",
    "parameters": {
        "type": "dict",
        "properties": {
            "source": {"type": "string", "description": "The file to move."},
            "lines": {"type": "integer", "description": "How many lines."},
            "force": {"type": "boolean", "description": "Overwrite."},
        },
        "required": ["source", "lines"],
    },
}


def test_a_bfcl_doc_becomes_a_typed_function() -> None:
    from ctxline.runner import function_tool

    seen: list[tuple[str, dict[str, object]]] = []

    def call(name: str, kwargs: dict[str, object]) -> str:
        seen.append((name, kwargs))
        return "moved"

    mv = python_function(DOC, call)
    spec = function_tool(mv).spec
    assert spec.name == "mv"
    assert spec.description.startswith("Move a file. Tool description")
    assert spec.parameters["required"] == ["source", "lines"]
    props = spec.parameters["properties"]
    assert dig(props, "lines", "type") == "integer"
    assert dig(props, "source", "description") == "The file to move."
    assert mv(source="a.txt", lines=3) == "moved"
    assert seen == [("mv", {"source": "a.txt", "lines": 3})]


def test_a_bfcl_doc_with_a_keyword_parameter_is_refused() -> None:
    doc = {"name": "f", "parameters": {"properties": {"from": {"type": "string"}}}}
    with pytest.raises(ValueError, match=r"f\.from"):
        python_function(doc, lambda name, kwargs: "")


def test_the_no_guide_variant_empties_the_guide_only_while_its_loop_runs() -> None:
    from agent_real.loops import LOOPS, _guide_off
    from ctxline.sources.guide import CORE_KINDS, GuideRegistry

    registry = GuideRegistry(CORE_KINDS)
    before = registry.compose()
    assert before
    with _guide_off():
        assert registry.compose() == ""
    assert registry.compose() == before
    with pytest.raises(RuntimeError), _guide_off():
        raise RuntimeError("a loop that fails")
    assert registry.compose() == before
    assert "ctxline_noguide" in LOOPS
