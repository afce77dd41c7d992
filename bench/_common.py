"""Shared helpers of the benchmark scripts: side-by-side timing, tables, machine facts.

Every script times ours against the alternatives in ONE process: each round runs every
candidate once, in turn (interleaved), after warm-up rounds; the reported time is the
median over the rounds. PyTorch is optional: a script that compares with it says so in its
table when it is not installed.
"""

from __future__ import annotations

import functools
import os
import platform
import time
import warnings
from collections.abc import Callable
from importlib import metadata
from typing import Any

import numpy as np

# Rounds for a full run; BENCH_QUICK=1 (used by a smoke run) shrinks everything.
QUICK = os.environ.get("BENCH_QUICK", "") not in ("", "0")


def rounds(full: int, quick: int = 1) -> int:
    """Number of timed rounds: ``full`` normally, ``quick`` with BENCH_QUICK=1."""
    return quick if QUICK else full


def quiet_warnings() -> None:
    """Silence the ConvergenceWarning of ``max_iter=1`` fits and library deprecations."""
    warnings.filterwarnings("ignore")


#: The note of a table whose torch rows are left out.
TORCH_MISSING = ("torch is not installed: `pip install torch==2.13.0` (the CPU build) to "
                 "compare with it.")


@functools.cache
def _torch_and_threads() -> tuple[Any, int | None]:
    """torch (or None) and its intra-op thread count when first imported, before any
    script's ``set_num_threads``."""
    try:
        import torch
    except ImportError:
        return None, None
    return torch, torch.get_num_threads()


def torch_or_none() -> Any:
    """The torch module, or None when it is not installed (it is an optional bench extra)."""
    return _torch_and_threads()[0]


def torch_default_threads() -> int | None:
    """torch's own default number of intra-op threads (None without torch): the scripts
    set it to 1 for their comparisons, this is what a user gets without doing so."""
    return _torch_and_threads()[1]


def interleaved_runs(
    candidates: dict[str, Callable[[], Any]], n_rounds: int = 5, warmup: int = 1
) -> dict[str, list[float]]:
    """Seconds of each candidate in every round, timed in interleaved rounds.

    Each round calls every candidate once, in the order given; ``warmup`` rounds are run
    first and discarded. Interleaving spreads slow drifts of the machine (frequency,
    other processes) over all candidates instead of charging them to one.
    """
    times: dict[str, list[float]] = {name: [] for name in candidates}
    for round_ in range(warmup + n_rounds):
        for name, func in candidates.items():
            begin = time.perf_counter()
            func()
            elapsed = time.perf_counter() - begin
            if round_ >= warmup:
                times[name].append(elapsed)
    return times


def interleaved(
    candidates: dict[str, Callable[[], Any]], n_rounds: int = 5, warmup: int = 1
) -> dict[str, float]:
    """Median seconds of each candidate over :func:`interleaved_runs`."""
    runs = interleaved_runs(candidates, n_rounds, warmup)
    return {name: float(np.median(values)) for name, values in runs.items()}


def ratio_spread(runs: dict[str, list[float]], a: str, b: str) -> str:
    """``a / b`` per round: the median, and the range over the rounds, as text."""
    ratios = np.array(runs[a]) / np.array(runs[b])
    if len(ratios) == 1:
        return f"{ratios[0]:.2f}x (1 round)"
    return (f"{np.median(ratios):.2f}x ({ratios.min():.2f}-{ratios.max():.2f}x over "
            f"{len(ratios)} rounds)")


def per_call(func: Callable[[], Any], number: int) -> Callable[[], Any]:
    """Wrap ``func`` so that one call of the wrapper runs it ``number`` times."""

    def run() -> None:
        for _ in range(number):
            func()

    return run


class Table:
    """A result table: printed as text and written as markdown by ``run_all.py``."""

    def __init__(self, title: str, columns: list[str], notes: list[str] | None = None) -> None:
        self.title = title
        self.columns = columns
        self.rows: list[list[str]] = []
        self.notes = list(notes or [])
        # (case, value) pairs that run_all.py gathers into the summary of every run.
        self.headlines: list[tuple[str, str]] = []

    def add(self, *cells: Any) -> None:
        """Append a row; floats are formatted with 4 significant digits."""
        self.rows.append([_fmt(cell) for cell in cells])

    def to_text(self) -> str:
        """Fixed-width text for the terminal."""
        widths = [
            max(len(str(c)) for c in [col] + [row[i] for row in self.rows])
            for i, col in enumerate(self.columns)
        ]
        lines = [self.title, "=" * len(self.title)]
        lines.append("  ".join(c.ljust(w) for c, w in zip(self.columns, widths, strict=True)))
        lines.append("  ".join("-" * w for w in widths))
        for row in self.rows:
            lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
        lines.extend(f"* {note}" for note in self.notes)
        return "\n".join(lines) + "\n"

    def to_markdown(self) -> str:
        """A markdown section: title, table, notes."""
        lines = [f"### {self.title}", ""]
        lines.append("| " + " | ".join(self.columns) + " |")
        lines.append("|" + "|".join("---" for _ in self.columns) + "|")
        lines.extend("| " + " | ".join(row) + " |" for row in self.rows)
        if self.notes:
            lines.append("")
            lines.extend(f"- {note}" for note in self.notes)
        return "\n".join(lines) + "\n"


def ratio_table(title: str, times: dict[str, float], ours: float) -> Table:
    """Seconds per epoch of every contender, with ours / it and it / ours."""
    table = Table(title, ["contender", "s/epoch", "ours / it", "it / ours"])
    for name, value in times.items():
        table.add(name, value, ratio(ours, value), ratio(value, ours))
    return table


def _fmt(cell: Any) -> str:
    if cell is None:
        return "n/a"
    if isinstance(cell, float | np.floating):
        value = float(cell)
        if value == 0 or not np.isfinite(value):
            return str(value)
        return f"{value:.4g}" if abs(value) >= 1e-3 else f"{value:.3e}"
    return str(cell)


def ratio(a: float | None, b: float | None) -> str:
    """``a / b`` as text ('n/a' when either is missing)."""
    if a is None or b is None or b == 0:
        return "n/a"
    return f"{a / b:.2f}x"


def verdict(value: float | None, target: float) -> str:
    """'yes' when ``value <= target``, 'NO' otherwise, 'n/a' if unknown."""
    if value is None:
        return "n/a"
    return "yes" if value <= target else "NO"


def cpu_model() -> str:
    """CPU model name from /proc/cpuinfo (or platform's guess)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_details() -> str:
    """Family, model number, cache and widest vector extension from /proc/cpuinfo: hosts
    that all report "Intel(R) Xeon(R) Processor" may differ there, which a comparison of
    two runs needs to know."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("cpu family", "model", "cache size", "flags") and key not in fields:
                    fields[key] = value.strip()
    except OSError:
        return "unknown"
    flags = fields.get("flags", "").split()
    vector = next((isa for isa in ("avx512f", "avx2", "avx", "sse4_2") if isa in flags), "")
    return (f"family {fields.get('cpu family', '?')}, model {fields.get('model', '?')}, "
            f"cache {fields.get('cache size', '?')}, {vector or 'no AVX'}")


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _onnxruntime_version() -> str:
    import onnxruntime

    return onnxruntime.__version__


def _auto_backend() -> str:
    from skl_ortgrad.gradient import resolve_backend

    return resolve_backend("auto")


def machine_info() -> dict[str, str]:
    """The machine and library versions a benchmark result depends on."""
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
        memory = f"{mem:.1f} GiB"
    except (ValueError, OSError, AttributeError):
        memory = "unknown"
    return {
        "CPU": cpu_model(),
        "CPU details": cpu_details(),
        "cores (os.cpu_count)": str(os.cpu_count()),
        "memory": memory,
        "OS": platform.platform(),
        "Python": platform.python_version(),
        "numpy": np.__version__,
        "scikit-learn": _version("scikit-learn"),
        "onnxruntime-training-cpu": _version("onnxruntime-training-cpu"),
        "onnxruntime (module)": _onnxruntime_version(),
        "gradient backend ('auto')": _auto_backend(),
        "onnx": _version("onnx"),
        "skl2onnx": _version("skl2onnx"),
        "torch": _version("torch"),
        "skl_ortgrad": _version("skl_ortgrad"),
    }


def print_tables(tables: list[Table]) -> None:
    """Print every table as text."""
    for table in tables:
        print(table.to_text())
