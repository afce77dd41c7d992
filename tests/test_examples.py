"""The examples run as scripts, not only in the gallery: each shows its figures with
``plt.show()`` (matplotlib's default backend, a window on a desktop) and leaves no file
behind in the temporary directory.

The gallery build itself is tests/test_docs.py.
"""

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("plot_*.py"))
# The package of this checkout (whatever the interpreter has installed) and the show
# recorder of tests/.
PYTHONPATH = os.pathsep.join(
    [str(ROOT / "tests"), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
# Left in the temporary directory by libraries, not by the examples: distributed's
# workers' scratch space, and the session file of onnxruntime 1.32 (Python 3.13).
LIBRARY_FILES = {"dask-scratch-space", ".ses"}


def _run(script, tmp_path, **env):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300,
        cwd=tmp_path, env={**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": PYTHONPATH, **env},
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return result, sorted(p.name for p in tmp.iterdir() if p.name not in LIBRARY_FILES)


def _run_shown(script, tmp_path):
    """Run ``script`` with a backend recording plt.show(): (shows, files left)."""
    folder = tmp_path / script.stem
    folder.mkdir()
    record = folder / "shown.txt"
    _, left = _run(script, folder, MPLBACKEND="module://_show_recorder",
                   SHOW_RECORD=str(record))
    return record.read_text(encoding="utf-8").split() if record.exists() else [], left


@pytest.mark.slow  # ~15 s: every example, as a script
def test_examples_as_scripts_show_their_figures(tmp_path):
    """Each example shows its figures once, at its end, and removes the files it wrote."""
    assert EXAMPLES, "no examples/plot_*.py found"
    with ThreadPoolExecutor(4) as pool:
        outcomes = pool.map(lambda script: _run_shown(script, tmp_path), EXAMPLES)
    for script, (shown, left) in zip(EXAMPLES, outcomes, strict=True):
        assert len(shown) == 1 and int(shown[0]) >= 1, (script.name, shown)
        assert left == [], (script.name, left)


def test_demo_leaves_no_folder_behind(tmp_path):
    result, left = _run(ROOT / "examples" / "demo.py", tmp_path)
    assert "saved " in result.stdout and "labels equal to predict: True" in result.stdout
    assert left == []
