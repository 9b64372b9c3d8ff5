"""Check the pricing table against a second source: litellm's bundled price file.

ctxline's prices (``src/ctxline/data/pricing.json``) are dated and cite their sources;
this script compares every entry with litellm's ``model_prices_and_context_window_backup.json``
when litellm is installed (``pip install litellm``; it is read as JSON, nothing is
fetched) and prints one JSON object: the models compared and every disagreement. Run it
when updating the table; it is not a test because litellm is not a dependency.

    .venv/bin/python benchmarks/check_pricing.py
"""

from __future__ import annotations

import importlib.util
import json
import sys
from decimal import Decimal
from pathlib import Path

from ctxline.pricing import default_table, price_for


def per_m(value: object) -> Decimal:
    return Decimal(str(value)) * 1_000_000


def main() -> None:
    spec = importlib.util.find_spec("litellm")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        print(json.dumps({"error": "litellm is not installed: pip install litellm"}))
        sys.exit(2)
    path = (
        Path(next(iter(spec.submodule_search_locations)))
        / "model_prices_and_context_window_backup.json"
    )
    theirs = json.loads(path.read_text("utf-8"))
    table = default_table()
    names = [*table.prices, *table.aliases]
    disagreements: list[dict[str, str]] = []

    def differs(name: str, what: str, ours: Decimal | None, their: object) -> None:
        if their is not None and ours != per_m(their):
            disagreements.append({"model": name, "field": what, "ours": str(ours), "litellm": str(per_m(their))})

    missing = []
    for name in names:
        p = price_for(name)
        row = theirs.get(name)
        if p is None or row is None:
            missing.append(name)
            continue
        differs(name, "input", p.input, row.get("input_cost_per_token"))
        differs(name, "output", p.output, row.get("output_cost_per_token"))
        differs(name, "cache_read", p.cache_read, row.get("cache_read_input_token_cost"))
        differs(name, "cache_write", p.cache_write, row.get("cache_creation_input_token_cost"))
        if p.cache_write_1h is not None:
            differs(name, "cache_write_1h", p.cache_write_1h, row.get("cache_creation_input_token_cost_above_1hr"))
    print(json.dumps({"compared": len(names) - len(missing), "missing_in_litellm": missing, "disagreements": disagreements}))
    sys.exit(1 if disagreements or missing else 0)


if __name__ == "__main__":
    main()
