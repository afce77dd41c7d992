"""Ctrl-C pressed at a chosen line of the package while a call runs (the tests of
interruption and ``bench/fault_campaign.py``).

A tracer (``sys.settrace``) follows the package's lines only and, at the chosen one,
calls the SIGINT handler in place as the signal would: Python's default handler raises
KeyboardInterrupt there, the trainer's deferring one records it for its next safe point.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import skl_ortgrad

PACKAGE = os.path.dirname(skl_ortgrad.__file__)


def package_lines(call: Callable[[], Any]) -> list[tuple[str, int]]:
    """The distinct ``(file, line)`` of the package ``call()`` runs, in the order first
    reached."""
    seen: dict[tuple[str, int], None] = {}

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        if not frame.f_code.co_filename.startswith(PACKAGE):
            return None
        if event == "line":
            seen.setdefault((frame.f_code.co_filename, frame.f_lineno))
        return trace

    sys.settrace(trace)
    try:
        call()
    finally:
        sys.settrace(None)
    return list(seen)


def at_line(line: tuple[str, int]) -> Callable[[FrameType], bool]:
    """Where :func:`ctrl_c_when` presses: the first time ``(file, line)`` runs."""
    return lambda frame: (frame.f_code.co_filename, frame.f_lineno) == line


def at_count(n: int) -> Callable[[FrameType], bool]:
    """Where :func:`ctrl_c_when` presses: at the ``n``-th package line the call runs."""
    count = [0]

    def hit(frame: FrameType) -> bool:
        count[0] += 1
        return count[0] == n

    return hit


def ctrl_c_when(call: Callable[[], Any],
                hit: Callable[[FrameType], bool]) -> tuple[BaseException | None, bool]:
    """Run ``call()``, pressing Ctrl-C at the first package line where ``hit(frame)``:
    (what the call raised, whether Ctrl-C was pressed)."""
    armed, pressed = [True], []

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        # Frames of generators keep their tracer after the call: armed only during it.
        if not armed[0] or not frame.f_code.co_filename.startswith(PACKAGE):
            return None
        if event == "line" and hit(frame):
            armed[0] = False
            sys.settrace(None)
            pressed.append(True)
            signal.getsignal(signal.SIGINT)(signal.SIGINT, frame)
        return trace

    sys.settrace(trace)
    try:
        call()
    except BaseException as exc:
        return exc, bool(pressed)
    finally:
        armed[0] = False
        sys.settrace(None)
    return None, bool(pressed)
