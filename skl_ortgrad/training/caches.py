"""What a trainer keeps between calls but never pickles: the onnxruntime objects (engines,
sessions, bound programs) and the mini-batch loader whose buffers they borrow."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from skl_ortgrad.training.engines import Engines
from skl_ortgrad.training.program_choice import ProgramCache

#: The attribute of a trainer holding its :class:`TrainerCaches`.
ATTRIBUTE = "_caches"


class TrainerCaches:
    """A trainer's engines, programs and last loader (``(key, loader)``).

    Parameters
    ----------
    engine : callable
        ``engine(weighted)``: the trainer's engine, which the generic program reads.
    """

    def __init__(self, engine: Callable[[bool], Any]) -> None:
        self._engine = engine
        self.clear()

    def clear(self) -> None:
        """Forget everything (the weight buffers they borrow were replaced)."""
        self.engines = Engines()
        self.programs = ProgramCache(self._engine)
        self.loader: tuple[tuple, Any] | None = None


def transient(trainer: Any) -> TrainerCaches:
    """The caches of ``trainer``, created on first use (and after unpickling)."""
    caches = trainer.__dict__.get(ATTRIBUTE)
    if caches is None:
        caches = trainer.__dict__[ATTRIBUTE] = TrainerCaches(trainer.engine)
    return caches
