"""``python -m ctxline.cli``: the same command as ``ctxline``."""

from ctxline.cli.main import main

main()
