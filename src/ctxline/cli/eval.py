"""CLI command ``eval``: does a model read ctxline's view right, against baselines?

    ctxline eval --model local:smollm2 --json
    ctxline eval --model openai:gpt-4.1-mini --families rules,branch --n 20 --report eval.html
    ctxline eval --model openai:qwen2.5-7b --base-url http://127.0.0.1:8000/v1
    ctxline eval --model local:qwen2.5-coder-1.5b-instruct-q4_k_m.gguf --families rules --views ctxline

Every error is one line on stderr and exit code 2.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from ctxline.cli.common import bounded_int, one_line_errors
from ctxline.cli.hints import explain_model_error, is_endpoint_error
from ctxline.cli.options import harden
from ctxline.errors import CtxlineError
from ctxline.eval import FAMILIES, VIEWS, EvalConfig, run_eval
from ctxline.eval.report import html_report
from ctxline.models import make_client
from ctxline.models.base import ModelClient, ModelError, ModelReply, Provider
from ctxline.record.events import JsonValue
from ctxline.record.jsonvalue import as_array, as_number, as_object, as_str, dig

__all__ = ["eval_cmd"]


MAX_INSTANCES = 100_000
"""The most instances per family ``eval --n`` takes (each is a model call)."""


class _EndpointDown(CtxlineError):
    """A model endpoint that is wrong or down: every later call would fail the same way."""


class _StopOnEndpointError:
    """``client``, except that a wrong or dead endpoint stops the whole eval at its first
    call (one line naming the URL and the fix) instead of failing every prompt in turn."""

    def __init__(self, client: ModelClient, base_url: str | None) -> None:
        self._client = client
        self._base_url = base_url

    @property
    def name(self) -> str:
        return self._client.name

    @property
    def provider(self) -> Provider:
        return self._client.provider

    def complete(self, body: Mapping[str, Any], *, provider: Provider) -> ModelReply:
        try:
            return self._client.complete(body, provider=provider)
        except ModelError as exc:
            if is_endpoint_error(exc):
                raise _EndpointDown(explain_model_error(str(exc), self._base_url)) from exc
            raise


def _families(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    return names or tuple(FAMILIES)


def _views(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    return names or tuple(VIEWS)


def _table(summary: dict[str, JsonValue]) -> Table:
    table = Table(
        title=f"{summary['model']}: accuracy (95 % Wilson interval), n per family {summary['n_per_family']}"
    )
    table.add_column("family")
    shown = [as_str(v) for v in as_array(summary["views"])]
    for view in shown:
        table.add_column(str(view), justify="right")
    accuracy = summary["accuracy"]
    tokens = summary["tokens"]
    assert isinstance(accuracy, dict)
    assert isinstance(tokens, dict)
    for family, views in accuracy.items():
        cells = []
        for view in shown:
            a = as_object(dig(views, view))
            lo, hi = (as_number(x) for x in as_array(a["ci95"]))
            cells.append(f"{as_number(a['accuracy']) * 100:.0f} % [{lo * 100:.0f}–{hi * 100:.0f}]")
        table.add_row(family, *cells)
    table.add_row(
        "tokens/request",
        *(f"{dig(tokens, 'all', v, 'input_mean')}" for v in shown),
        style="dim",
    )
    return table


@click.command("eval")
@click.option(
    "--model",
    default="local:smollm2",
    show_default=True,
    help="kind:name (openai:…, anthropic:…, local:smollm2).",
)
@click.option(
    "--base-url",
    default=None,
    help="An OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp server).",
)
@click.option(
    "--families",
    default=",".join(FAMILIES),
    show_default=True,
    help="Comma-separated probe families.",
)
@click.option(
    "--views",
    default=",".join(VIEWS),
    show_default=True,
    help="Comma-separated views to send (e.g. ctxline alone, to re-measure a rendering).",
)
@click.option(
    "--n",
    "n",
    type=bounded_int(max=MAX_INSTANCES),
    default=50,
    show_default=True,
    help="Instances per family.",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--excerpt-tokens",
    type=bounded_int(max=1_000_000),
    default=400,
    show_default=True,
    help="Tokens of real trajectory per instance.",
)
@click.option(
    "--data",
    "data_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Trajectory folder (default ../shared/data).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option(
    "--report",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write an HTML report here.",
)
def eval_cmd(
    model: str,
    base_url: str | None,
    families: str,
    views: str,
    n: int,
    seed: int,
    excerpt_tokens: int,
    data_dir: Path | None,
    as_json: bool,
    report: Path | None,
) -> None:
    """Measure whether a model reads ctxline's view right, against two baselines."""
    with one_line_errors():
        config = EvalConfig(
            families=_families(families),
            views=_views(views),
            n=n,
            seed=seed,
            excerpt_tokens=excerpt_tokens,
            data_dir=data_dir,
        )
        client = make_client(model, base_url=base_url, seed=seed)
        err = Console(stderr=True)
        last = [0.0]

        def progress(done: int, total: int) -> None:
            now = time.monotonic()
            if done == total or now - last[0] > 5:
                last[0] = now
                err.print(f"[dim]{done}/{total} prompts[/dim]")

        result = run_eval(_StopOnEndpointError(client, base_url), config, progress=progress)
        summary = result.summary()
        if report is not None:
            report.write_text(html_report(result), encoding="utf-8")
        if as_json:
            click.echo(json.dumps(summary, indent=2, ensure_ascii=False))
        else:
            console = Console()
            console.print(_table(summary))
            console.print(
                f"[dim]{summary['prompts']} prompts, {summary['errors']} errors, {summary['seconds']} s; prompts sha256 {summary['prompts_sha256']}[/dim]"
            )


# hardened where defined, as the ctxline group would: imported directly, it refuses the same
harden(eval_cmd)
