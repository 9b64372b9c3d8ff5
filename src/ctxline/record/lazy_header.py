"""Request headers read back packed: their options and report are unpacked at first use.

Why: a long session logs a request header every step, and a checked read unpacked every
one of them (:func:`~ctxline.record.packed.unpack`: the options' defaults and the report's
derivable fields put back) though nearly every reader looks at a few: a Context opening
on the session rebuilds only the last logged request, and the status bar's and the
environment's folds read each header's ``tokens``, which the packed report stores as is.
On a 2,000-step session the unpacking was 40 % of ``store.read`` and 2 KB of memory a
header (issue 25). A header whose row's digest matched its link — so ctxline wrote it,
and :func:`~ctxline.record.packed.pack` checked that it unpacks exactly — is read as a
:class:`LazyRequestHeader`: the same value (equal to the eager header, field for field),
whose ``options`` and ``report`` are unpacked the first time either is read, and whose
:meth:`~ctxline.record.events.RequestHeader.report_field` answers a field stored as is
from the packed report. Written again (an export), it writes the packed form it was read
in, byte for byte. A body not known to be ctxline's (unchained files, the doctor's
unchecked parse) is still unpacked at once, so a bad one is an error naming its line.

    header = LazyRequestHeader.packed(3, 8, "sha256:…", opts, rep, inputs, meta)
    header.report_field("tokens")   # no unpacking
    header.report["budget"]         # unpacked now, once
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, cast

from ctxline.record.events import JsonValue, RequestHeader
from ctxline.record.packed import unpack, unpack_field

__all__ = ["LazyRequestHeader"]

_Dict = dict[str, JsonValue]
# The slots of RequestHeader's two unpacked fields; the subclass's properties shadow them.
_OPTIONS: Any = RequestHeader.__dict__["options"]
_REPORT: Any = RequestHeader.__dict__["report"]
_COMPARED = tuple(f.name for f in fields(RequestHeader) if f.compare)


class LazyRequestHeader(RequestHeader):
    """A :class:`RequestHeader` read back packed from a checked row (see the module)."""

    __slots__ = ("_packed",)

    @classmethod
    def packed(
        cls,
        step: int,
        upto_seq: int,
        sha256: str,
        opts: _Dict,
        rep: _Dict,
        inputs: _Dict,
        meta: _Dict,
    ) -> LazyRequestHeader:
        self = object.__new__(cls)
        for name, value in (
            ("step", step),
            ("upto_seq", upto_seq),
            ("sha256", sha256),
            ("inputs", inputs),
            ("meta", meta),
            ("plain", False),
            ("_packed", (opts, rep)),
        ):
            object.__setattr__(self, name, value)
        return self

    def _unpack(self) -> None:
        packed: tuple[_Dict, _Dict] | None = getattr(self, "_packed", None)
        if packed is not None:
            options, report = unpack(packed[0], packed[1], step=self.step)
            _OPTIONS.__set__(self, options)
            _REPORT.__set__(self, report)
            object.__setattr__(self, "_packed", None)  # last: both slots are set by now

    @property
    def options(self) -> _Dict:
        self._unpack()
        return cast("_Dict", _OPTIONS.__get__(self))

    @options.setter
    def options(self, value: _Dict) -> None:  # the dataclass's __init__ and __setstate__
        _OPTIONS.__set__(self, value)

    @property
    def report(self) -> _Dict:
        self._unpack()
        return cast("_Dict", _REPORT.__get__(self))

    @report.setter
    def report(self, value: _Dict) -> None:
        _REPORT.__set__(self, value)

    def report_field(self, name: str) -> JsonValue:
        packed: tuple[_Dict, _Dict] | None = getattr(self, "_packed", None)
        if packed is not None:
            return unpack_field(packed[0], packed[1], name, step=self.step)
        return self.report.get(name)

    def packed_form(self) -> tuple[_Dict, _Dict] | None:
        """``(opts, rep)`` as read, while the header was not unpacked (then ``None``)."""
        return getattr(self, "_packed", None)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RequestHeader):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in _COMPARED)

    __hash__ = None  # type: ignore[assignment]  # as RequestHeader's: its dicts are unhashable
