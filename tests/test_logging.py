"""``import skl_ortgrad`` and the first import of onnxruntime, whoever makes it, leave the
root logger as it was (onnxruntime-training's import calls ``logging.basicConfig()``), so
a logging configuration made after them works.

Each test runs a fresh interpreter: in this one, onnxruntime is imported already.
"""

import re
import subprocess
import sys


def _python(code):
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    return result


def test_import_leaves_an_unconfigured_root_logger_unconfigured():
    _python(
        "import logging\n"
        "import skl_ortgrad\n"
        "root = logging.getLogger()\n"
        "assert (root.handlers, root.level) == ([], logging.WARNING), (root.handlers, root.level)\n"
    )


def test_the_first_fit_imports_onnxruntime_and_leaves_the_root_logger_unconfigured():
    """``import skl_ortgrad`` does not load onnxruntime: the fit that does keeps the root
    logger as it was, and so does a user's own first ``import onnxruntime``."""
    for first_import in ("skl_ortgrad.OnnxSGDRegressor(max_iter=2).fit([[0.0], [1.0]], "
                         "[0.0, 1.0])", "import onnxruntime"):
        _python(
            "import logging, sys, warnings\n"
            "warnings.simplefilter('ignore')\n"
            "import skl_ortgrad\n"
            "assert 'onnxruntime' not in sys.modules\n"
            f"{first_import}\n"
            "assert 'onnxruntime' in sys.modules\n"
            "root = logging.getLogger()\n"
            "assert (root.handlers, root.level) == ([], logging.WARNING), (root.handlers, "
            "root.level)\n"
        )


def test_import_leaves_a_configured_root_logger_as_configured():
    _python(
        "import logging\n"
        "root = logging.getLogger()\n"
        "handler = logging.NullHandler()\n"
        "root.addHandler(handler)\n"
        "root.setLevel(logging.ERROR)\n"
        "import skl_ortgrad\n"
        "assert (root.handlers, root.level) == ([handler], logging.ERROR), root.handlers\n"
    )


def test_basic_config_after_import_gets_the_training_lines(tmp_path):
    """A log file configured after the import receives every epoch and the summary, as
    plain lines; stderr, a pipe here, gets plain lines too (verbose=1)."""
    log = tmp_path / "train.log"
    result = _python(
        "import logging\n"
        "from sklearn.datasets import load_iris\n"
        "import skl_ortgrad\n"
        f"logging.basicConfig(level=logging.INFO, filename={str(log)!r})\n"
        "X, y = load_iris(return_X_y=True)\n"
        "skl_ortgrad.OnnxSGDClassifier(max_iter=3, tol=None, random_state=0,\n"
        "                              verbose=1).fit(X, y)\n"
    )
    text = log.read_text(encoding="utf-8")
    assert "\r" not in text and "\r" not in result.stderr
    lines = text.splitlines()
    assert len(lines) == 4, text
    for k, line in enumerate(lines[:3], start=1):
        assert re.fullmatch(rf"INFO:skl_ortgrad\.training\.progress:epoch {k}: "
                            r"loss=[-+.\de]+", line), line
    assert lines[3].startswith(
        "INFO:skl_ortgrad.training.progress:fit: max_iter reached after 3 epoch(s) in ")
    assert [line.split(":", 2)[2] for line in lines] == result.stderr.splitlines()
