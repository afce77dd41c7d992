"""Run onnxcustom's own unit tests of its training API against skl_ortgrad's seed API.

onnxcustom's ``_unittests/ut_training/*.py`` and ``_unittests/ut_utils/
test_orttraining_helper.py`` are extracted from an onnxcustom checkout (or a bare git
directory of its repository) into a temporary folder, never into this repository, and run
there by pytest with the plugin ``bench/onnxcustom_shim.py``, which points the
``onnxcustom.*`` imports at skl_ortgrad's modules (the module map of
``docs/onnxcustom.rst``) and stands in for the test helpers of pyquickhelper and
mlprodict. The outcome of every test is tallied, every test that does not pass is listed
with the first line of its error and its reason (:data:`REASONS`), and ``--write``
replaces the generated block of ``docs/onnxcustom.rst``. Usage::

    python bench/onnxcustom_tests.py /path/to/onnxcustom            # a checkout
    python bench/onnxcustom_tests.py /path/to/onnxcustom.git --write  # a bare repository
    python bench/onnxcustom_tests.py SOURCE -k forward_backward
"""

from __future__ import annotations

import argparse
import ast
import collections
import datetime
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
DOC = os.path.join(ROOT, "docs", "onnxcustom.rst")
BEGIN, END = ".. GENERATED: onnxcustom_tests", ".. END GENERATED"
TEST_PATHS = ["_unittests/ut_training", "_unittests/ut_utils/test_orttraining_helper.py"]
MESSAGE_WIDTH = 120

_FULL_GRAPH = ("out of scope: onnxcustom's full-graph ``OrtGradientOptimizer`` "
               "(``training.optimizers``)")
_PRIVATE = ("reads private attributes of onnxcustom's generated function class "
            "(``_onx_inp``, ``_onx_out``, ``_sess_eval``, ``_trained_onnx``...)")
# Why a test does not pass: by file (every test of it), then by "file::test".
FILE_REASONS: dict[str, str] = {"test_optimizers": _FULL_GRAPH}
REASONS: dict[str, str] = {
    "test_optimizers_classification::test_ort_gradient_optimizers_binary": _FULL_GRAPH,
    "test_optimizers_classification::test_ort_gradient_optimizers_binary_weighted":
        _FULL_GRAPH,
    "test_optimizers_nan::test_ort_gradient_optimizers_reg": _FULL_GRAPH,
    "test_optimizers_nan::test_ort_gradient_optimizers_reg_w": _FULL_GRAPH,
    "test_optimizers_nan::test_ort_gradient_optimizers_binary": _FULL_GRAPH,
    "test_orttraining_forward_backward::test_forward_no_training": _PRIVATE,
    "test_orttraining_forward_backward::test_forward_no_training_pickle": _PRIVATE,
    "test_orttraining_forward_backward::test_forward_training_linreg": _PRIVATE,
    "test_orttraining_helper::test_clean_grad": (
        "imports the private ``_rewrite_op_no_grad``, which rewrites ``Reciprocal``; "
        "skl_ortgrad's ``rewrite_no_gradient_ops`` leaves it, it has a gradient in "
        "onnxruntime-training 1.19 (measured)"),
    "test_optimizers_forward_backward::test_ort_gradient_optimizers_nn": (
        "intended: skl_ortgrad trains weights in the order given, onnxcustom refuses "
        "names out of alphabetical order"),
    "test_optimizers_forward_backward::test_ort_gradient_optimizers_nn_w": (
        "intended: skl_ortgrad trains weights in the order given, onnxcustom refuses "
        "names out of alphabetical order"),
    "test_optimizers_forward_backward::test_ort_gradient_optimizers_pickle": (
        "a float ``learning_rate`` is a constant rate here (``LearningRateSGD(eta0=x, "
        "learning_rate='constant')``, the estimators' meaning), onnxcustom's is "
        "``LearningRateSGD(eta0=x)``, its invscaling decay: the repr shows 'constant'"),
    "test_optimizers_forward_backward::test_ort_gradient_optimizers_pickle_w": (
        "a float ``learning_rate`` is a constant rate here (``LearningRateSGD(eta0=x, "
        "learning_rate='constant')``, the estimators' meaning), onnxcustom's is "
        "``LearningRateSGD(eta0=x)``, its invscaling decay: the repr shows 'constant'"),
    "test_optimizers_forward_backward::test_ort_gradient_optimizers_nesterov_penalty_l2": (
        "reads onnxcustom's penalty internals: ``save_onnx_graph(bytes)['learning_penalty']``"
        " holding graphs named ``penalty_onnx_`` and ``penalty_grad_onnx_`` whose constants "
        "are stored in ``float_data``"),
    "test_gradient_mlp::test_gradient_mlpregressor": (
        "calls scikit-learn's private ``MLPRegressor._backprop`` with its signature before "
        "``sample_weight`` was added, then onnxcustom internals (``train_function_``, "
        "``device`` as an ``OrtDevice``, ``loss_gradient`` on OrtValues)"),
    "test_gradient_mlp::test_gradient_mlpclassifier": (
        "calls scikit-learn's private ``MLPClassifier._backprop`` with its signature before "
        "``sample_weight`` was added, then onnxcustom internals (``train_function_``, "
        "``device`` as an ``OrtDevice``, ``loss_gradient`` on OrtValues)"),
    "test_grad_helper::test_grad_helper_loss": (
        "asks ``DerivativeOptions.Loss`` for the output ``loss`` of a model without one (it "
        "passes the model, not the model with its loss): onnxruntime-training 1.19.2's "
        "``GradientGraphBuilder`` returns a model that does not load (input ``variable_grad`` "
        "undefined, checked); skl_ortgrad refuses with a ValueError naming the outputs"),
    "test_grad_helper::test_grad_helper_keep_yield": (
        "with the onnx backend only: ``DerivativeOptions.KeepYieldOp`` returns "
        "onnxruntime-training's graph around its ``YieldOp``, it needs that backend"),
    "test_grad_helper::test_grad_helper_mul": (
        "expects more than one output from the gradient of a graph without weights; "
        "onnxruntime-training 1.19.2's builder gives ``X_grad`` alone (checked), so does "
        "onnxcustom's own code on it"),
    "test_grad_helper::test_grad_helper_noweight": (
        "expects more than one output from the gradient of a graph without weights; "
        "onnxruntime-training 1.19.2's builder gives ``X_grad`` alone (checked), so does "
        "onnxcustom's own code on it"),
}


def extract(source: str, folder: str) -> None:
    """Copy the test files of an onnxcustom checkout or bare repository into ``folder``."""
    if os.path.isdir(os.path.join(source, "_unittests")):
        for path in TEST_PATHS:
            origin, target = os.path.join(source, path), os.path.join(folder, path)
            if os.path.isdir(origin):
                shutil.copytree(origin, target)
            else:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                shutil.copyfile(origin, target)
        return
    archive = subprocess.run(
        ["git", "--git-dir", source, "archive", "HEAD", *TEST_PATHS],
        check=True, capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)


def source_commit(source: str) -> str:
    """The commit of onnxcustom that was run, or 'unknown' outside git."""
    flag = ["-C", source] if os.path.isdir(os.path.join(source, "_unittests")) else [
        "--git-dir", source]
    result = subprocess.run(["git", *flag, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True, check=False)
    return result.stdout.strip() or "unknown"


def run_pytest(folder: str, keyword: str | None, report: str) -> int:
    """pytest over the extracted tests, with the shim plugin; its exit code."""
    ini = os.path.join(folder, "pytest.ini")
    with open(ini, "w", encoding="utf-8") as f:
        f.write("[pytest]\n")
    command = [
        sys.executable, "-m", "pytest", "-c", ini, "--rootdir", folder,
        "-p", "no:cacheprovider", "-p", "onnxcustom_shim", "--import-mode=importlib",
        "--continue-on-collection-errors",
        f"--junitxml={report}", "-q", "--tb=no", "-rN", "-W", "ignore",
        *TEST_PATHS,
    ]
    if keyword:
        command += ["-k", keyword]
    env = dict(os.environ)
    # bench/ for the plugin; the repository root so that its skl_ortgrad is the one tested.
    env["PYTHONPATH"] = os.pathsep.join([BENCH, ROOT, *filter(None, [env.get("PYTHONPATH")])])
    return subprocess.run(command, cwd=folder, env=env, check=False).returncode


def test_names(path: str) -> list[str]:
    """The test methods of the unittest classes of a test file, read without importing it."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    return [
        item.name
        for node in tree.body if isinstance(node, ast.ClassDef)
        for item in node.body
        if isinstance(item, ast.FunctionDef) and item.name.startswith("test")
    ]


def read_report(path: str, folder: str) -> list[dict[str, str]]:
    """Every test of pytest's JUnit XML: file, test, outcome and first error line.

    A file that fails to import reports one error for the whole file: each of its tests
    is counted as an error with that message.
    """
    tests = []
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed"}.get(child.tag, child.tag)
                lines = [line.strip() for line in (child.text or "").splitlines()
                         if line.strip()]
                if child.get("message") == "collection failure":
                    # The text is a traceback, whose last line is the error.
                    message = lines[-1].removeprefix("E").strip() if lines else ""
                else:
                    message = (child.get("message") or "").strip().split("\n")[0]
                break
        classname, name = case.get("classname", ""), case.get("name", "")
        if not classname:  # a file that did not import; name is its dotted path
            stem = name.rsplit(".", 1)[-1]
            tests += [{"file": stem, "test": test, "outcome": "error", "message": message}
                      for test in test_names(os.path.join(folder, *name.split(".")) + ".py")]
        else:
            tests.append({"file": classname.rsplit(".", 2)[-2], "test": name,
                          "outcome": outcome, "message": message})
    return tests


def reason(test: dict[str, str]) -> str:
    """Why a test does not pass (:data:`FILE_REASONS`, :data:`REASONS`)."""
    return FILE_REASONS.get(test["file"]) or REASONS.get(f"{test['file']}::{test['test']}",
                                                          "not explained")


def _cut(text: str) -> str:
    """An error line as the page shows it: no backquote, no local path, no object id."""
    text = text.replace("`", "'").replace(ROOT + os.sep, "")
    text = re.sub(r"(OrtGradientForwardBackwardFunction)_\d+", r"\1_<id>", text)
    return text if len(text) <= MESSAGE_WIDTH else text[: MESSAGE_WIDTH - 3] + "..."


def summary(tests: list[dict[str, str]]) -> str:
    """``N of M pass`` overall, and without the files that are out of scope."""
    passed = sum(t["outcome"] == "passed" for t in tests)
    kept = [t for t in tests if t["file"] not in FILE_REASONS]
    files = sorted({t["file"] for t in tests if t["file"] in FILE_REASONS})
    text = f"{passed} of {len(tests)} pass"
    if files:
        text += (f"; {sum(t['outcome'] == 'passed' for t in kept)} of {len(kept)} without "
                 + ", ".join(f"{name}.py" for name in files) + " (out of scope)")
    return text


def render(tests: list[dict[str, str]], seconds: float, selection: str) -> str:
    """The generated reStructuredText block (without its markers)."""
    import onnxruntime
    import sklearn

    from skl_ortgrad._version import __version__
    from skl_ortgrad.gradient import resolve_backend

    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for test in tests:
        counts[test["file"]][test["outcome"]] += 1
    lines = [
        f"Run on {datetime.date.today().isoformat()} in {seconds:.0f} s ({selection}) with "
        f"Python {sys.version.split()[0]}, onnxruntime {onnxruntime.__version__}, "
        f"scikit-learn {sklearn.__version__}, skl_ortgrad {__version__}, gradient backend "
        f"``{resolve_backend('auto')}``: **{summary(tests)}**.",
        "",
        ".. list-table::",
        "   :header-rows: 1",
        "",
        "   * - test file",
        "     - passed",
        "     - failed",
        "     - error",
        "     - skipped",
    ]
    for name in sorted(counts):
        lines.append(f"   * - ``{name}.py``")
        lines += [f"     - {counts[name][o]}" for o in ("passed", "failed", "error", "skipped")]
    failing = sorted((t for t in tests if t["outcome"] != "passed"),
                     key=lambda t: (t["file"] in FILE_REASONS, t["file"], t["test"]))
    rows, grouped = [], collections.Counter()
    for test in failing:
        if test["file"] in FILE_REASONS:
            grouped[test["file"]] += 1
            continue
        rows.append((f"``{test['file']}::{test['test']}``", reason(test),
                     f"``{_cut(test['message'])}``" if test["message"] else ""))
    rows += [(f"``{name}.py`` ({n} tests)", FILE_REASONS[name], "")
             for name, n in sorted(grouped.items())]
    if rows:
        lines += ["", "The tests that do not pass:", "", ".. list-table::",
                  "   :header-rows: 1", "   :widths: 30 45 25", "",
                  "   * - test", "     - reason", "     - first line of the error"]
        for name, why, message in rows:
            lines += [f"   * - {name}", f"     - {why}", f"     - {message}".rstrip()]
    return "\n".join(lines) + "\n"


def write_doc(block: str) -> None:
    """Replace the generated block of the page."""
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{DOC}: the markers {BEGIN} / {END} are missing")
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    with open(DOC, "w", encoding="utf-8") as f:
        f.write(f"{head}{BEGIN}\n\n{block}\n{END}{tail}")


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="an onnxcustom checkout or bare git repository")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression, passed through")
    parser.add_argument("--write", action="store_true",
                        help="replace the generated block of docs/onnxcustom.rst")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="onnxcustom_tests_") as folder:
        extract(os.path.abspath(args.source), folder)
        report = os.path.join(folder, "report.xml")
        begin = time.perf_counter()
        exit_code = run_pytest(folder, args.keyword, report)
        seconds = time.perf_counter() - begin
        # 0: all passed, 1: some failed, 5: nothing selected; others: pytest itself failed.
        if exit_code not in (0, 1, 5) or not os.path.exists(report):
            print(f"pytest failed to run (exit code {exit_code})", file=sys.stderr)
            return 2
        tests = read_report(report, folder)

    print()
    for test in sorted(tests, key=lambda t: (t["file"], t["test"])):
        if test["outcome"] != "passed":
            print(f"{test['outcome'].upper():8} {test['file']}::{test['test']}: "
                  f"{_cut(test['message'])} [{reason(test)}]")
    print(f"\nonnxcustom's tests: {summary(tests)}")
    if args.write:
        selection = (f"``python bench/onnxcustom_tests.py <onnxcustom> --write``, onnxcustom "
                     f"{source_commit(os.path.abspath(args.source))}")
        if args.keyword:
            selection += f", -k {args.keyword!r}"
        write_doc(render(tests, seconds, selection))
        print(f"wrote {os.path.relpath(DOC, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
