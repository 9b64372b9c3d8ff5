"""The eval's HTML report: one self-contained page, no scripts, everything escaped.

It shows the accuracy table (per family and view, with 95 % Wilson intervals drawn as
bars), the tokens per view, the estimator's error, the notes on truncation, and every
instance: its question, the exact answer, and each view's reply — with the prompt
each view sent, to check what the model actually read.

    Path("eval.html").write_text(html_report(result))
"""

from __future__ import annotations

import json
from collections import defaultdict
from html import escape
from typing import Any

from ctxline.eval.runner import EvalResult, Record
from ctxline.record.jsonvalue import as_array, as_str, dig

__all__ = ["html_report"]

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2rem;max-width:76rem;color:#222}
table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;padding:.3rem .6rem;text-align:left}
th{background:#f4f4f4}.bar{position:relative;height:.8rem;width:10rem;background:#eee}
.ci{position:absolute;height:100%;background:#9cf}.pt{position:absolute;width:2px;height:100%;background:#036}
.ok{color:#075}.bad{color:#a00}pre{white-space:pre-wrap;background:#fafafa;padding:.5rem;max-height:30rem;overflow:auto}
details{margin:.3rem 0}summary{cursor:pointer}
"""


def _bar(acc: float | None, lo: float, hi: float) -> str:
    if acc is None:
        return ""
    return (
        f'<div class="bar"><div class="ci" style="left:{lo * 100:.1f}%;width:{(hi - lo) * 100:.1f}%">'
        f'</div><div class="pt" style="left:{acc * 100:.1f}%"></div></div>'
    )


def _accuracy_table(summary: dict[str, Any]) -> str:
    shown = summary["views"]
    rows = ["<tr><th>family</th>" + "".join(f"<th>{v}</th>" for v in shown) + "</tr>"]
    for family, views in summary["accuracy"].items():
        cells = []
        for view in shown:
            a = views[view]
            lo, hi = a["ci95"]
            pct = "–" if a["accuracy"] is None else f"{a['accuracy'] * 100:.0f} %"
            cells.append(
                f"<td>{pct} <small>({a['correct']}/{a['n']}, CI {lo * 100:.0f}–{hi * 100:.0f})</small>"
                f"{_bar(a['accuracy'], lo, hi)}</td>"
            )
        rows.append(f"<tr><th>{escape(family)}</th>{''.join(cells)}</tr>")
    return "<table>" + "".join(rows) + "</table>"


def _tokens_table(summary: dict[str, Any]) -> str:
    shown = summary["views"]
    rows = ["<tr><th>family</th>" + "".join(f"<th>{v}</th>" for v in shown) + "</tr>"]
    for family, views in summary["tokens"].items():
        cells = "".join(
            f"<td>{views[v]['input_mean']} <small>(est. {views[v]['estimated_mean']})</small></td>"
            for v in shown
        )
        rows.append(f"<tr><th>{escape(family)}</th>{cells}</tr>")
    return "<table>" + "".join(rows) + "</table>"


def _prompt_text(record: Record) -> str:
    return json.dumps(record.prompt.body, indent=1, ensure_ascii=False)


def _instances(records: list[Record]) -> str:
    grouped: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        grouped[r.prompt.instance.id].append(r)
    out: list[str] = []
    for inst_id, rows in grouped.items():
        inst = rows[0].prompt.instance
        marks = " ".join(
            f'<span class="{"ok" if r.correct else "bad"}">{r.prompt.view} {"✓" if r.correct else "✗"}</span>'
            for r in rows
        )
        parts = [
            f"<details><summary><b>{escape(inst_id)}</b> — {marks}</summary>",
            f"<p>source: {escape(inst.source)}<br>question: {escape(inst.question)}<br>"
            f"answer: <b>{escape(inst.answer)}</b></p>",
        ]
        for r in rows:
            got = "none" if r.extracted is None else r.extracted
            parts.append(
                f"<details><summary>{r.prompt.view}: reply {escape(r.reply.strip()[:200])!s} "
                f"→ {escape(got)}{' — error: ' + escape(r.error) if r.error else ''}</summary>"
                f"<pre>{escape(_prompt_text(r))}</pre></details>"
            )
        parts.append("</details>")
        out.append("".join(parts))
    return "\n".join(out)


def html_report(result: EvalResult) -> str:
    """The report page for ``result``."""
    summary = result.summary()
    estimator = "".join(
        f"<tr><th>{v}</th><td>{escape(json.dumps(dig(summary, 'estimator', as_str(v))))}</td></tr>"
        for v in as_array(summary["views"])
    )
    notes = "".join(f"<li>{escape(str(n))}</li>" for n in as_array(summary["notes"]))
    head = (
        f"model <b>{escape(result.model)}</b>, {summary['n_per_family']} instances per family, "
        f"seed {summary['seed']}, temperature 0, {summary['prompts']} prompts "
        f"(sha256 {as_str(summary['prompts_sha256'])[:16]}…), {summary['errors']} errors, "
        f"{summary['seconds']} s"
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>ctxline eval</title>"
        f"<style>{_STYLE}</style></head><body><h1>ctxline eval</h1><p>{head}</p>"
        "<h2>Accuracy (95 % Wilson interval)</h2>"
        + _accuracy_table(summary)
        + "<h2>Input tokens per request (provider-reported; ctxline's estimate)</h2>"
        + _tokens_table(summary)
        + f"<h2>Estimator error vs provider input tokens</h2><table>{estimator}</table>"
        + f"<h2>Notes</h2><ul>{notes}</ul><h2>Instances</h2>"
        + _instances(result.records)
        + "</body></html>"
    )
