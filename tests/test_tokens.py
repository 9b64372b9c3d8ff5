"""Token counting: exact counters equal tiktoken's own, offline; the memo counts once."""

from __future__ import annotations

import base64
import json
import lzma
import os
import pickle
import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest
import tiktoken
import tiktoken.load

from conftest import shared_data
from ctxline.errors import TokenizerUnavailable, ValidationError
from ctxline.record.events import (
    AssistantMessage,
    Compaction,
    Event,
    Notification,
    Rule,
    State,
    StoredEvent,
    SystemMessage,
    Todo,
    TodoItem,
    ToolCall,
    ToolResult,
    UnknownEvent,
    UserMessage,
)
from ctxline.tokens import tiktoken_files as tf
from ctxline.tokens.counters import (
    COUNTER_NAMES,
    BytesEstimator,
    TiktokenCounter,
    TokenCache,
    count_event,
    count_many,
    event_text,
    get_counter,
)

EXACT = ("o200k_base", "cl100k_base")

CORPUS = [
    "",
    "hello world",
    "Hello, World! How's it going? I'd've thought you'll be there.",
    "def fib(n: int) -> int:\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
    '{"name": "search", "arguments": {"query": "flights SFO→JFK", "limit": 10}}',
    "    indented\n\n\n\ttabs\r\nwindows line\r\n   trailing   ",
    "请帮我取消我的订阅计划，并退还上个月的费用。谢谢！",
    "日本語のテキストと한국어 텍스트, and العربية too.",
    "emoji 🎉👩‍👩‍👧‍👦🏳️‍🌈 and flags 🇯🇵🇺🇸, combining é vs é",
    "<|endoftext|> is special, as are <|endofprompt|><|fim_prefix|><|fim_middle|><|fim_suffix|>",
    "numbers 1234567890 3.14159 -42 1e-9 0xDEADBEEF",
    "x" * 5000,
    " " * 3000 + "end",
    "a\u0000b\x08c\u200bd\ufeff",
]


BUNDLED = tf.bundled_dir()  # looked up before any test hides it


def _plain_copy(name: str, path: Path) -> Path:
    """The bundled rank file of ``name``, decompressed to ``path``."""
    path.write_bytes(lzma.decompress((BUNDLED / f"{name}.tiktoken.xz").read_bytes()))
    return path


def test_bundled_files_are_in_the_package() -> None:
    import ctxline

    assert Path(ctxline.__file__).resolve().parent / "tokens" / "tiktoken_data" == BUNDLED
    for name in EXACT:
        packed = BUNDLED / f"{name}.tiktoken.xz"
        assert 400_000 < packed.stat().st_size < 1_500_000  # compressed: a few MB in all
    assert "MIT License" in (BUNDLED / "LICENSE").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tiktoken.Encoding]:
    """tiktoken.get_encoding's own encodings, fed the bundled files in its cache, no network.

    tiktoken checks each cached file against its own expected hash, so this also checks
    the bundled copies independently of ctxline's loader.
    """
    cache = tmp_path_factory.mktemp("tiktoken-cache")
    for name in EXACT:
        _plain_copy(name, cache / tf.SPECS[name].cache_key)

    def no_network(blobpath: str) -> bytes:
        raise AssertionError(f"tiktoken tried to download {blobpath}")

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TIKTOKEN_CACHE_DIR", str(cache))
        mp.setattr(tiktoken.load, "read_file", no_network)
        return {name: tiktoken.get_encoding(name) for name in EXACT}


@pytest.fixture
def no_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """No encoding file anywhere: env vars unset, no bundled copies, process cache empty."""
    monkeypatch.delenv("CTXLINE_TIKTOKEN_DIR", raising=False)
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.setattr(tf, "bundled_dir", lambda: Path("/nonexistent/tiktoken_data"))
    monkeypatch.setattr(tf, "_CACHE", {})
    monkeypatch.setattr(tf, "_FOUND", {})


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


def _data_texts(per_folder_chars: int | None) -> list[str]:
    texts: list[str] = []
    for folder in sorted(p for p in shared_data().iterdir() if p.is_dir()):
        found: list[str] = []
        for path in sorted(folder.rglob("*")):
            if path.suffix == ".jsonl":
                for line in path.read_text(encoding="utf-8").splitlines():
                    if line.strip():
                        _strings(json.loads(line), found)
            elif path.suffix in (".json", ".traj"):
                _strings(json.loads(path.read_text(encoding="utf-8")), found)
        total = 0
        for text in dict.fromkeys(found):
            if per_folder_chars is not None and total >= per_folder_chars:
                break
            texts.append(text)
            total += len(text)
    assert texts
    return texts


# --- exactness ------------------------------------------------------------------------


@pytest.mark.parametrize("name", EXACT)
def test_encoding_equals_tiktoken(reference: dict[str, tiktoken.Encoding], name: str) -> None:
    ours, ref = tf.encoding(name), reference[name]
    assert ours.name == ref.name == name
    assert ours._pat_str == ref._pat_str
    assert ours._special_tokens == ref._special_tokens
    assert ours.max_token_value == ref.max_token_value
    # the Rust side got every rank: each token's bytes, by rank, are tiktoken's
    ranks = ref._mergeable_ranks
    assert ours.n_vocab == ref.n_vocab
    assert all(ours.decode_single_token_bytes(rank) == token for token, rank in ranks.items())


def test_a_counter_checks_its_file_at_once_and_builds_the_encoding_at_its_first_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """o200k's tables (48 MB, 28 MB more while built) are not held by a process that has
    not counted yet, such as one reading a 50 MB output back (issue 25)."""
    monkeypatch.setattr(tf, "_CACHE", {})
    monkeypatch.setattr(tf, "_FOUND", {})
    counter = get_counter("cl100k")
    assert "cl100k_base" in tf._FOUND
    assert not tf._CACHE
    assert counter.count("hello world") == 2
    assert list(tf._CACHE) == ["cl100k_base"]
    assert counter.encoding is tf._CACHE["cl100k_base"]  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", EXACT)
def test_the_python_copy_of_the_ranks_is_dropped_and_pickling_reloads_by_name(
    name: str,
) -> None:
    """tiktoken keeps the ranks' dict only to pickle itself (27 MB for o200k): ctxline's
    encoding drops it, and a pickled one comes back as the same cached encoding."""
    ours = tf.encoding(name)
    assert ours._mergeable_ranks == {}
    again = pickle.loads(pickle.dumps(ours))
    assert again is ours
    assert again.encode_ordinary("hello world") == ours.encode_ordinary("hello world")


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 16])
def test_ranks_parsed_a_chunk_at_a_time_are_the_whole_file(
    monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """The rank file is split a chunk of whole lines at a time (issue 25: its 400,000 fields
    as one list were 30 MB beside the dict): every boundary, and a last line without its
    newline, gives the ranks a single split gives; a field left over is still refused."""
    monkeypatch.setattr(tf, "_PARSE_CHUNK", chunk)
    data = lzma.decompress((BUNDLED / "cl100k_base.tiktoken.xz").read_bytes())[:20_000]
    data = data[: data.rindex(b"\n")]  # no newline after the last line
    fields = data.split()
    whole = {base64.b64decode(k): int(v) for k, v in zip(fields[::2], fields[1::2], strict=True)}
    assert tf._parse_ranks(data, Path("x")) == whole
    assert len(whole) > 1000
    with pytest.raises(TokenizerUnavailable, match="malformed rank file"):
        tf._parse_ranks(data + b"\nQUJD", Path("x"))
    with pytest.raises(TokenizerUnavailable, match="malformed rank line"):
        tf._parse_ranks(b"QUJD 1\nQUJD x\n", Path("x"))


@pytest.mark.parametrize("name", EXACT)
def test_counts_equal_tiktoken_on_corpus(
    reference: dict[str, tiktoken.Encoding], name: str
) -> None:
    counter, ref = get_counter(name), reference[name]
    expected = [len(ref.encode(t, disallowed_special=())) for t in CORPUS]
    assert [counter.count(t) for t in CORPUS] == expected
    assert count_many(counter, CORPUS) == expected


@pytest.mark.parametrize("name", EXACT)
def test_special_token_text_is_ordinary(reference: dict[str, tiktoken.Encoding], name: str) -> None:
    counter = get_counter(name)
    text = "before <|endoftext|> after <|endofprompt|>"
    assert counter.count(text) == len(reference[name].encode_ordinary(text)) > 4
    assert counter.count("<|endoftext|>") > 1  # never the single special token


@pytest.mark.parametrize("name", EXACT)
def test_counts_equal_tiktoken_on_data_sample(
    reference: dict[str, tiktoken.Encoding], name: str
) -> None:
    texts = _data_texts(per_folder_chars=150_000)
    ours = count_many(get_counter(name), texts)
    assert ours == [len(t) for t in reference[name].encode_ordinary_batch(texts, num_threads=2)]


@pytest.mark.slow
@pytest.mark.parametrize("name", EXACT)
def test_counts_equal_tiktoken_on_all_data(
    reference: dict[str, tiktoken.Encoding], name: str
) -> None:
    texts = _data_texts(per_folder_chars=None)
    ours = count_many(get_counter(name), texts)
    assert ours == [len(t) for t in reference[name].encode_ordinary_batch(texts, num_threads=2)]


def test_parallel_batch_equals_sequential() -> None:
    counter = get_counter("o200k")
    texts = [f"line {i}: " + "def f(x):\n    return x * 2  # 中文\n" * 2000 for i in range(24)]
    assert sum(map(len, texts)) > 1 << 20
    assert count_many(counter, texts) == [counter.count(t) for t in texts]


def test_long_whitespace_run_does_not_crash() -> None:
    counter = get_counter("o200k")
    for space in (" ", "\u3000"):  # the first is sliced up front, the second after a panic
        exact_600k = len(tf.encoding("o200k_base").encode_ordinary(space * 600_000))
        assert counter.count(space * 1_000_000) == pytest.approx(exact_600k / 0.6, rel=0.002)
    assert counter.count("still works") == 2


def test_cache_keys_and_loading_once() -> None:
    assert tf.SPECS["o200k_base"].cache_key == "fb374d419588a4632f3f557e76b4b70aebbca790"
    assert tf.SPECS["cl100k_base"].cache_key == "9b5ad71b2ce5302211f9c61530b329a4922fc6a4"
    assert tf.encoding("o200k_base") is tf.encoding("o200k_base")


def test_never_uses_tiktoken_loader(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args: object, **kwargs: object) -> bytes:
        raise AssertionError("tiktoken's loader was called")

    monkeypatch.setattr(tiktoken.load, "read_file_cached", forbidden)
    monkeypatch.setattr(tiktoken.load, "read_file", forbidden)
    assert tf.load_encoding("cl100k_base", [BUNDLED]).encode_ordinary("hello world") == [
        15339,
        1917,
    ]


def test_base_install_counts_exactly_offline() -> None:
    """A fresh process, no environment folders, downloads impossible: the bundled copies serve."""
    code = (
        "import tiktoken.load\n"
        "def no(*a, **k): raise AssertionError('tiktoken tried to load a file itself')\n"
        "tiktoken.load.read_file = tiktoken.load.read_file_cached = no\n"
        "from ctxline.tokens.counters import get_counter\n"
        "assert get_counter('o200k').count('hi there') == 2\n"
        "assert get_counter('cl100k').count('hello world') == 2\n"
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CTXLINE_TIKTOKEN_DIR", "TIKTOKEN_CACHE_DIR")
    }
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=60)


# --- files that are missing or wrong ----------------------------------------------------


def test_file_by_plain_name_in_ctxline_dir(
    no_files: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _plain_copy("cl100k_base", tmp_path / "cl100k_base.tiktoken")
    monkeypatch.setenv("CTXLINE_TIKTOKEN_DIR", str(tmp_path))
    assert get_counter("cl100k").count("hello world") == 2


def test_corrupted_file_is_rejected_and_kept(
    no_files: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = tf.SPECS["o200k_base"]
    bad = tmp_path / spec.cache_key
    bad.write_bytes(b"aGVsbG8= 0\n")
    monkeypatch.setenv("CTXLINE_TIKTOKEN_DIR", str(tmp_path))
    with pytest.raises(TokenizerUnavailable) as caught:
        get_counter("o200k_base")
    message = str(caught.value)
    assert str(bad) in message
    assert "expected " + spec.sha256 in message
    assert bad.read_bytes() == b"aGVsbG8= 0\n"


def test_corrupted_file_falls_back_to_a_verified_one(tmp_path: Path) -> None:
    bad = tmp_path / tf.SPECS["o200k_base"].cache_key
    bad.write_bytes(b"garbage")
    enc = tf.load_encoding("o200k_base", [tmp_path, BUNDLED])
    assert enc.encode_ordinary("hello world") == [24912, 2375]
    assert bad.read_bytes() == b"garbage"


def test_damaged_compressed_copies_are_rejected(
    no_files: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = tf.SPECS["cl100k_base"]
    plain = lzma.decompress((BUNDLED / spec.file_names[2]).read_bytes())
    (tmp_path / spec.file_names[2]).write_bytes(b"not xz at all")
    other = tmp_path / "other"
    other.mkdir()
    (other / spec.file_names[2]).write_bytes(lzma.compress(plain[:-10] + b"AAAA= 1\n"))
    monkeypatch.setattr(tf, "bundled_dir", lambda: other)
    monkeypatch.setenv("CTXLINE_TIKTOKEN_DIR", str(tmp_path))
    with pytest.raises(TokenizerUnavailable) as caught:
        get_counter("cl100k")
    message = str(caught.value)
    assert f"{tmp_path / spec.file_names[2]} is not a valid xz file" in message
    assert f"{other / spec.file_names[2]} decompressed to sha256 " in message
    assert "expected " + spec.sha256 in message
    # a good compressed copy in the user's folder is used before the bundled one
    (tmp_path / spec.file_names[2]).write_bytes(lzma.compress(plain))
    assert get_counter("cl100k").count("hello world") == 2


@pytest.mark.parametrize("name", ["o200k", "cl100k_base"])
def test_missing_everywhere_is_actionable(no_files: None, name: str) -> None:
    spec = tf.SPECS[name if name.endswith("_base") else name + "_base"]
    with pytest.raises(TokenizerUnavailable) as caught:
        get_counter(name)
    message = str(caught.value)
    for needle in (
        "reinstall ctxline",
        "CTXLINE_TIKTOKEN_DIR",
        spec.cache_key,
        spec.sha256,
        spec.url,
    ):
        assert needle in message
    assert f"{spec.name}.tiktoken" in message
    assert str(tf.BUNDLED_DIR / f"{spec.name}.tiktoken.xz") in message


# --- estimator and names ----------------------------------------------------------------


def test_bytes_estimator() -> None:
    est = get_counter("bytes/4")
    assert isinstance(est, BytesEstimator)
    assert est.name == "bytes/4"
    assert [est.count(t) for t in ("", "a", "abcd", "abcde", "x" * 400)] == [0, 1, 1, 2, 100]
    chinese = "请帮我取消我的订阅计划"  # 11 characters, 33 UTF-8 bytes
    assert est.count(chinese) == 9 > len(chinese) // 4
    assert est.count("ok \ud83d") == 2  # a lone surrogate does not raise
    assert count_many(est, ["abcd", "中文"]) == [1, 2]


def test_get_counter_names() -> None:
    assert get_counter("bytes").name == get_counter(" BYTES/4 ").name == "bytes/4"
    with pytest.raises(ValidationError) as caught:
        get_counter("gpt2")
    for name in COUNTER_NAMES:
        assert name in str(caught.value)
    for alias, name in [("o200k", "o200k_base"), ("cl100k", "cl100k_base")]:
        counter = get_counter(alias)
        assert isinstance(counter, TiktokenCounter)
        assert counter.name == get_counter(name).name == name


# --- event text ---------------------------------------------------------------------------


def test_event_text_per_kind() -> None:
    call = ToolCall("c1", "search", {"q": "vols", "n": 2})
    cases: list[tuple[Event, str]] = [
        (SystemMessage("be brief", meta={"x": "not read"}), "be brief"),
        (UserMessage("hi"), "hi"),
        (AssistantMessage("looking", (call,)), 'looking\nsearch\n{"n":2,"q":"vols"}'),
        (AssistantMessage(tool_calls=(ToolCall("c2", "run", "{bad json"),)), "run\n{bad json"),
        (ToolResult("c1", "3 results", name="search"), "3 results"),
        (State("cart", {"items": ["é"]}), 'cart\n{"items":["é"]}'),
        (State("cart", "plain text"), "cart\nplain text"),
        (State("cart", cleared=True), "cart"),
        (Rule("r1", "set", text="answer in French"), "r1\nanswer in French"),
        (Notification("ci", "build failed", ref="x"), "ci\nbuild failed"),
        (
            Todo("write", (TodoItem("1", "fix bug"), TodoItem("2", "test", "completed"))),
            "[pending] fix bug\n[completed] test",
        ),
        (Todo("update", item_id="1", status="completed"), "1 completed"),
        (Compaction(summary="we did X", trigger="auto", pre_tokens=9), "we did X"),
        (UnknownEvent("future.kind", {"b": 1, "a": "z"}), '{"a":"z","b":1}'),
    ]
    for event, expected in cases:
        assert event_text(event) == expected, event
    est = BytesEstimator()
    assert count_event(est, UserMessage("abcdefgh")) == 2


# --- memo -----------------------------------------------------------------------------------


class CountingCounter:
    """Wraps a counter and records every text it is asked to count (no batch path)."""

    def __init__(self) -> None:
        self.name = "bytes/4"
        self.calls: list[str] = []

    def count(self, text: str) -> int:
        self.calls.append(text)
        return BytesEstimator().count(text)


class DictStore:
    def __init__(self) -> None:
        self.data: dict[tuple[str, str], int] = {}
        self.gets: list[tuple[list[str], str]] = []
        self.puts: list[tuple[str, dict[str, int]]] = []

    def get_token_counts(self, event_ids: Sequence[str], tokenizer: str) -> dict[str, int]:
        self.gets.append((list(event_ids), tokenizer))
        return {i: self.data[(tokenizer, i)] for i in event_ids if (tokenizer, i) in self.data}

    def put_token_counts(self, tokenizer: str, counts: dict[str, int]) -> None:
        self.puts.append((tokenizer, dict(counts)))
        self.data.update({(tokenizer, i): n for i, n in counts.items()})


def _stored(texts: Sequence[str]) -> list[StoredEvent]:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    return [StoredEvent(i + 1, f"ev{i}", at, UserMessage(t)) for i, t in enumerate(texts)]


@pytest.fixture
def events() -> list[StoredEvent]:
    return _stored(["abcd", "hello world", "中文内容", "x" * 41])


def test_cache_counts_each_event_once(events: list[StoredEvent]) -> None:
    counter, store = CountingCounter(), DictStore()
    cache = TokenCache(counter, store)
    expected = [1, 3, 3, 11]
    assert cache.counts(events) == expected
    assert cache.counts(events + events[:2]) == [*expected, 1, 3]
    assert cache.count(events[2]) == 3
    assert sorted(counter.calls) == sorted(event_text(s.event) for s in events)
    assert len(store.gets) == 1
    assert store.puts == [(cache.key, {"ev0": 1, "ev1": 3, "ev2": 3, "ev3": 11})]
    assert cache.key == "bytes/4@1"
    assert len(cache) == 4


def test_cache_reads_store_before_counting(events: list[StoredEvent]) -> None:
    store = DictStore()
    TokenCache(CountingCounter(), store).counts(events[:2])
    counter = CountingCounter()
    cache = TokenCache(counter, store)
    assert cache.counts(events) == [1, 3, 3, 11]
    assert counter.calls == [event_text(s.event) for s in events[2:]]
    assert store.gets[-1] == (["ev0", "ev1", "ev2", "ev3"], "bytes/4@1")
    assert store.puts[-1] == ("bytes/4@1", {"ev2": 3, "ev3": 11})
    assert len(store.puts) == 2


def test_cache_without_store_and_duplicates(events: list[StoredEvent]) -> None:
    counter = CountingCounter()
    cache = TokenCache(counter)
    assert cache.counts([events[0], events[0], events[1]]) == [1, 1, 3]
    assert len(counter.calls) == 2
    assert cache.counts([]) == []


def test_search_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CTXLINE_TIKTOKEN_DIR", str(tmp_path / "a"))
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "b"))
    assert tf.search_dirs() == [tmp_path / "a", tmp_path / "b", tf.BUNDLED_DIR]
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    monkeypatch.delenv("CTXLINE_TIKTOKEN_DIR")
    assert tf.search_dirs() == [tf.BUNDLED_DIR]


def test_a_huge_text_is_estimated_from_samples_close_to_the_exact_count() -> None:
    from ctxline.tokens import counters

    counter = get_counter("o200k")
    text = "".join(f"build step {i}: compiling module {i % 97} ok\n" for i in range(230_000))
    assert len(text) > counters._HUGE
    exact = len(counter.encoding.encode_ordinary(text))  # type: ignore[attr-defined]
    estimate = counter.count(text)
    assert estimate == counter.count(text)  # the same on every run
    assert abs(estimate - exact) <= exact // 200  # within 0.5 %
    # a text whose halves tokenize differently: the windows are spread over all of it
    mixed = text[: len(text) // 2] + "生成步骤完成" * (len(text) // 12)
    exact = len(counter.encoding.encode_ordinary(mixed))  # type: ignore[attr-defined]
    assert abs(counter.count(mixed) - exact) <= exact // 50  # within 2 %


def test_a_huge_text_is_counted_from_its_samples_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxline.tokens import counters

    counter = get_counter("o200k")
    enc = counter.encoding  # type: ignore[attr-defined]
    seen: list[int] = []
    original = enc.encode_ordinary

    def spy(text: str) -> list[int]:
        seen.append(len(text))
        ids: list[int] = original(text)
        return ids

    monkeypatch.setattr(enc, "encode_ordinary", spy)
    text = "x = 1\n" * 5_000_000  # 30M characters
    assert counter.count(text) > 0
    assert sum(seen) == counters._SAMPLES * counters._WINDOW  # 1.6M characters, not 30M
