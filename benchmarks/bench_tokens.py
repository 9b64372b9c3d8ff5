
"""Token counting throughput and the estimator's error; prints one JSON object.

    .venv/bin/python benchmarks/bench_tokens.py [DATA_DIR]

DATA_DIR defaults to ``$CTXLINE_SHARED_DATA``, else ``../shared/data`` from the repo root.

The corpus is every distinct message and tool-output string in the trajectories
(JSON string values of 40+ characters or holding a space or newline). Throughput is
single-threaded ``count`` over the corpus (UTF-8 MB/s, best of a few runs), plus
``count_many`` (threads) for the exact counters. The estimator's error is
``(bytes/4 total - o200k total) / o200k total``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

from ctxline.tokens.counters import TokenCounter, count_many, get_counter

ROOT = Path(__file__).resolve().parents[1]

# An original passage (not from any dataset) about agent context, in Simplified Chinese.
CHINESE = (
    "智能体在执行长任务时，会不断积累对话记录、工具调用和工具输出。"
    "如果每次调用模型之前都把全部历史原样发送，很快就会超出上下文窗口，"
    "而且费用也会随之迅速上升。因此，我们需要在预算之内选择保留哪些内容："
    "用户的原始指令必须逐字保留，最近几轮的工具结果应当完整可见，"
    "较早的大段输出可以折叠成摘要，并在需要时通过工具重新读取。"
    "与此同时，提示的前缀应尽量保持稳定，这样服务商的缓存才能命中，"
    "延迟和成本都会明显下降。请在每一步报告删除了什么、为什么删除，"
    "以及删除之后还剩多少令牌，方便开发者检查和调试。"
) * 20


def _strings(value: object, out: list[str]) -> None:
    if isinstance(value, str):
        if len(value) >= 40 or " " in value or "\n" in value:
            out.append(value)
    elif isinstance(value, dict):
        for item in value.values():
            _strings(item, out)
    elif isinstance(value, list):
        for item in value:
            _strings(item, out)


def load_corpus(data: Path) -> dict[str, list[str]]:
    """Distinct texts per top-level source folder."""
    corpus: dict[str, list[str]] = {}
    for folder in sorted(p for p in data.iterdir() if p.is_dir()):
        found: list[str] = []
        for path in sorted(folder.rglob("*")):
            if path.suffix == ".jsonl":
                for line in path.read_text(encoding="utf-8").splitlines():
                    if line.strip():
                        _strings(json.loads(line), found)
            elif path.suffix in (".json", ".traj"):
                _strings(json.loads(path.read_text(encoding="utf-8")), found)
        corpus[folder.name] = list(dict.fromkeys(found))
    return corpus


def _count_each(counter: TokenCounter, texts: Sequence[str]) -> list[int]:
    return [counter.count(t) for t in texts]


def _mb_per_s(run: Callable[[], object], megabytes: float, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return round(megabytes / best, 2)


def _rel_error(estimate: int, exact: int) -> float:
    return round((estimate - exact) / exact, 4)


def main(argv: Sequence[str]) -> int:
    default = os.environ.get("CTXLINE_SHARED_DATA") or ROOT.parent / "shared" / "data"
    data = Path(argv[1] if len(argv) > 1 else default)
    corpus = load_corpus(data)
    texts = [t for group in corpus.values() for t in group]
    megabytes = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts) / 1e6

    result: dict[str, object] = {
        "corpus": {"path": str(data), "texts": len(texts), "utf8_mb": round(megabytes, 2)},
    }
    load_s: dict[str, float] = {}
    counters: dict[str, TokenCounter] = {}
    for name in ("o200k_base", "cl100k_base", "bytes/4"):
        start = time.perf_counter()
        counters[name] = get_counter(name)
        load_s[name] = round(time.perf_counter() - start, 3)
    result["load_s"] = load_s

    throughput: dict[str, float] = {}
    for name, counter in counters.items():
        repeats = 5 if name == "bytes/4" else 2
        throughput[name] = _mb_per_s(partial(_count_each, counter, texts), megabytes, repeats)
        if name != "bytes/4":
            throughput[name + " batch"] = _mb_per_s(
                partial(count_many, counter, texts), megabytes, repeats
            )
    result["mb_per_s"] = throughput

    exact, estimate = counters["o200k_base"], counters["bytes/4"]
    by_source: dict[str, float] = {}
    totals = [0, 0]
    for source, group in corpus.items():
        e, x = sum(count_many(estimate, group)), sum(count_many(exact, group))
        by_source[source] = _rel_error(e, x)
        totals[0] += e
        totals[1] += x
    result["o200k_tokens"] = totals[1]
    result["cl100k_tokens"] = sum(count_many(counters["cl100k_base"], texts))
    result["estimator_rel_error_vs_o200k"] = {
        "corpus": _rel_error(*totals),
        "chinese": _rel_error(estimate.count(CHINESE), exact.count(CHINESE)),
        "chinese_chars_per_token": round(len(CHINESE) / exact.count(CHINESE), 2),
        "chars_div_4_on_chinese": _rel_error((len(CHINESE) + 3) // 4, exact.count(CHINESE)),
        "by_source": by_source,
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
