"""The ``ctxline`` command line: one module per command group (see :mod:`ctxline.cli.main`)."""

from ctxline.cli.main import main

__all__ = ["main"]
