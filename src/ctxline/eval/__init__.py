"""``ctxline eval``: does a model read ctxline's view right, compared with two baselines?

Probe families (:mod:`ctxline.eval.probes`) inject facts into real trajectories and ask
a question with one short exact answer; each instance is rendered as ctxline's view, a
roles-only baseline and a system-snapshot baseline (:mod:`ctxline.eval.views`), sent to
a model at temperature 0, and scored exactly with 95 % Wilson intervals
(:mod:`ctxline.eval.scoring`, :mod:`ctxline.eval.runner`). :mod:`ctxline.eval.report`
writes the HTML report.

    result = run_eval(make_client("local:smollm2"), EvalConfig(n=50, seed=0))
    result.summary()["accuracy"]["rules"]["ctxline"]
"""

from ctxline.eval.probes import FAMILIES, Instance
from ctxline.eval.runner import EvalConfig, EvalResult, Prompt, Record, build_prompts, run_eval
from ctxline.eval.views import VIEWS

__all__ = [
    "FAMILIES",
    "VIEWS",
    "EvalConfig",
    "EvalResult",
    "Instance",
    "Prompt",
    "Record",
    "build_prompts",
    "run_eval",
]
