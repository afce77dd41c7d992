"""Run scikit-learn's own SGD and MLP test files on skl_ortgrad's estimators.

scikit-learn's ``test_sgd.py`` and ``test_mlp.py``, from the installed scikit-learn, run
under pytest with the plugin ``bench/sklearn_substitute.py``, which puts OnnxSGDClassifier,
OnnxSGDRegressor, OnnxMLPClassifier and OnnxMLPRegressor in the place of scikit-learn's
classes. The outcome of every test is tallied per file, every test that does not pass is
listed with the first line of its error and a cause, and the result replaces the generated
block of ``docs/sklearn_tests.md``. Usage::

    python bench/sklearn_drop_in.py                 # both files, rewrites the page
    python bench/sklearn_drop_in.py --only mlp -k warm_start --no-write
    python bench/sklearn_drop_in.py --batch-size 1 --dtype float64 --no-write

``--batch-size`` and ``--dtype`` change the defaults of the substituted classes (the
plugin reads them from the environment variable ``SKL_ORTGRAD_DROP_IN_DEFAULTS``): with
``--batch-size 1 --dtype float64`` the SGD estimators follow scikit-learn's per-sample
updates, which tells the failures due to the mini-batch default from the others.
``--batch-size`` applies to the SGD estimators only: the MLPs' ``batch_size='auto'``
already means what it means in scikit-learn (``min(200, n_samples)``).
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import machine_info

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
DOC = os.path.join(ROOT, "docs", "sklearn_tests.md")
BEGIN, END = "<!-- GENERATED: sklearn_drop_in -->", "<!-- END GENERATED -->"
TEST_MODULES = {
    "sgd": "sklearn.linear_model.tests.test_sgd",
    "mlp": "sklearn.neural_network.tests.test_mlp",
}
NOT_APPLICABLE = "not applicable: "  # the plugin's skip-reason prefix
DEFAULTS_VARIABLE = "SKL_ORTGRAD_DROP_IN_DEFAULTS"  # read by the plugin
OUTCOMES = ["passed", "failed", "error", "skipped", "not applicable"]
MESSAGE_WIDTH = 150

INTRO = """\
# scikit-learn's own tests

How far are the estimators from drop-in replacements? `bench/sklearn_drop_in.py` runs two
test files of the installed scikit-learn, `sklearn/linear_model/tests/test_sgd.py` and
`sklearn/neural_network/tests/test_mlp.py`, unchanged, with `OnnxSGDClassifier`,
`OnnxSGDRegressor`, `OnnxMLPClassifier` and `OnnxMLPRegressor` in the place of
scikit-learn's classes, and with the parameters as the tests write them:

```
.venv/bin/python bench/sklearn_drop_in.py            # both files, rewrites this page
.venv/bin/python bench/sklearn_drop_in.py --only sgd -k warm_start --no-write
.venv/bin/python bench/sklearn_drop_in.py --batch-size 1 --dtype float64 --no-write
```

The pytest plugin `bench/sklearn_substitute.py` replaces the attributes
`sklearn.linear_model.SGDClassifier`, `.SGDRegressor`, `sklearn.neural_network.MLPClassifier`
and `.MLPRegressor` before the test modules are imported, so that the tests' factories,
their `_SparseSGD*` subclasses and their imports all get ours. skl_ortgrad is imported
first and keeps scikit-learn's real classes (it needs them for the ONNX conversion).
scikit-learn's private modules are not touched. A run reports any name in a test module
still bound to one of scikit-learn's classes; none should be.

A test is *not applicable*, skipped without running, when it tests something other than
these four estimators:

1. a parameter is, or is named after, an estimator of scikit-learn's SGD engine that
   skl_ortgrad does not provide (`SGDOneClassSVM`, `Perceptron`, `PassiveAggressive*`,
   and the `SparseSGDOneClassSVM` of the test file);
2. its name contains `oneclass`, `one_class` or `ocsvm` (the `SGDOneClassSVM` tests);
3. its body uses `sgd_fast.` or `_stochastic_gradient.`: scikit-learn's Cython loss
   functions or its private SGD module.

The share passing is passed / (tests collected - not applicable). Tests that read
scikit-learn's private attributes (`_optimizer`, `_no_improvement_count`, ...) count as
applicable; when that is what fails, their cause names the attribute. The cause of a
failure is guessed from the first line of its error by a few patterns (`CAUSES` in the
script). All that follows is generated: do not edit it by hand.

"""

# (pattern on the first error line, cause): the first match names the cause.
CAUSES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^TypeError: .*unexpected keyword argument '(\w+)'"), "refused parameter {0}"),
    (re.compile(r"^ValueError: Invalid parameter '(\w+)' for estimator"),
     "refused parameter {0}"),
    (re.compile(r"InvalidParameterError: The '(\w+)' parameter"),
     "InvalidParameterError on {0}"),
    (re.compile(r"InvalidParameterError"), "InvalidParameterError"),
    (re.compile(r"DID NOT WARN.*ConvergenceWarning"), "ConvergenceWarning not raised"),
    (re.compile(r"DID NOT WARN"), "expected warning not raised"),
    (re.compile(r"DID NOT RAISE"), "expected exception not raised"),
    (re.compile(r"^AttributeError: .*has no attribute '(_\w+)'"),
     "private scikit-learn attribute {0}"),
    (re.compile(r"^AttributeError: .*has no attribute '(\w+)'"), "missing attribute {0}"),
    (re.compile(r"Regex pattern did not match"), "different error message"),
    (re.compile(r"^AssertionError: assert dtype\("), "dtype differs"),
    (re.compile(r"^AssertionError: (\s*Not equal to tolerance|\s*Arrays are not"
                r"|\s*Mismatched elements|assert .*(?:<|>|==|!=|approx))"),
     "AssertionError: numeric mismatch"),
    (re.compile(r"^AssertionError"), "AssertionError: other"),
]


def cause(outcome: str, message: str) -> str:
    """The cause of a non-passing test, from its outcome and first error line.

    Parameters
    ----------
    outcome : str
        'failed', 'error', 'skipped', 'xfailed' or 'xpassed'.
    message : str
        The first line of the error, ``ExceptionType: message``.

    Returns
    -------
    str
        A short cause; 'other' when no pattern matches.
    """
    if outcome in ("skipped", "xfailed"):
        return outcome
    for pattern, label in CAUSES:
        match = pattern.search(message)
        if match:
            return label.format(*match.groups())
    return "other"


def run_pytest(
    modules: list[str], keyword: str | None, report: str, workdir: str,
    defaults: dict[str, dict[str, Any]] | None = None,
) -> int:
    """Run the test modules under the substitution plugin; pytest's exit code.

    pytest runs in ``workdir`` with an empty ini file there, so that neither this
    repository's pytest configuration and conftest nor files the tests write get mixed in.
    ``defaults`` (``{"sgd": {...}, "mlp": {...}}``) changes the substituted classes'
    default parameters.
    """
    ini = os.path.join(workdir, "pytest.ini")
    with open(ini, "w", encoding="utf-8") as f:
        f.write("[pytest]\n")
    command = [
        sys.executable, "-m", "pytest", "-c", ini, "--rootdir", workdir,
        "-p", "no:cacheprovider", "-p", "sklearn_substitute", "--drop-in-report", report,
        "--continue-on-collection-errors", "-q", "--tb=no", "-rN", "--durations=20",
        "--pyargs", *modules,
    ]
    if keyword:
        command += ["-k", keyword]
    env = dict(os.environ)
    # bench/ for the plugin; the repository root so that its skl_ortgrad is the one tested.
    env["PYTHONPATH"] = os.pathsep.join(
        [BENCH, ROOT, *filter(None, [env.get("PYTHONPATH")])]
    )
    env[DEFAULTS_VARIABLE] = json.dumps(defaults or {})
    return subprocess.run(command, cwd=workdir, env=env, check=False).returncode


def substituted_defaults(batch_size: int | None, dtype: str | None) -> dict[str, dict[str, Any]]:
    """The defaults to give the substituted classes, per family ('sgd', 'mlp')."""
    defaults: dict[str, dict[str, Any]] = {}
    if batch_size is not None:
        defaults.setdefault("sgd", {})["batch_size"] = batch_size
    if dtype is not None:
        for family in ("sgd", "mlp"):
            defaults.setdefault(family, {})["dtype"] = dtype
    return defaults


def tally(tests: list[dict[str, Any]]) -> dict[str, collections.Counter[str]]:
    """Outcome counts per test file, not applicable apart, xfail/xpass folded in."""
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for test in tests:
        counts[test["file"]][bucket(test)] += 1
    return counts


def bucket(test: dict[str, Any]) -> str:
    """The column a test is counted in."""
    if test["not_applicable"]:
        return "not applicable"
    # An xfail (a scikit-learn known failure) did not pass; an xpass ran and passed.
    return {"xfailed": "skipped", "xpassed": "passed"}.get(test["outcome"], test["outcome"])


def share(count: collections.Counter[str]) -> tuple[int, int, str]:
    """(passed, applicable, percentage text)."""
    applicable = sum(count.values()) - count["not applicable"]
    percent = f"{100 * count['passed'] / applicable:.0f}%" if applicable else "n/a"
    return count["passed"], applicable, percent


def _code(text: str) -> str:
    """Text as a markdown code span that is safe in a table cell."""
    text = text.replace("`", "'").replace("|", "\\|")
    return f"`{text}`" if text else ""


def _cut(text: str) -> str:
    return text if len(text) <= MESSAGE_WIDTH else text[: MESSAGE_WIDTH - 3] + "..."


def render(payload: dict[str, Any], selection: str, seconds: float, exit_code: int) -> str:
    """The generated markdown block (without its markers)."""
    tests = payload["tests"]
    counts = tally(tests)
    info = machine_info()
    today = datetime.date.today().isoformat()
    lines = [
        f"Run on {today} in {seconds:.0f} s ({selection}; pytest exit code {exit_code}) on "
        f"{info['CPU']}, {info['cores (os.cpu_count)']} cores, {info['OS']}; Python "
        f"{info['Python']}, scikit-learn {info['scikit-learn']}, onnxruntime "
        f"{info['onnxruntime (module)']}, skl2onnx {info['skl2onnx']}, numpy "
        f"{info['numpy']}, skl_ortgrad {info['skl_ortgrad']}.",
        "",
    ]
    if payload["unsubstituted"]:
        lines += [
            "**Substitution incomplete**: these names still hold scikit-learn's classes, "
            "their tests ran scikit-learn: " + ", ".join(payload["unsubstituted"]) + ".",
            "",
        ]
    for error in payload["collect_errors"]:
        lines += [f"**Collection error** in `{error['nodeid']}`: {_code(_cut(error['message']))}",
                  ""]

    lines += ["## Counts", ""]
    lines.append("| test file | " + " | ".join(OUTCOMES) + " | passing |")
    lines.append("|---" * (len(OUTCOMES) + 2) + "|")
    for name in sorted(counts):
        passed, applicable, percent = share(counts[name])
        cells = [str(counts[name][outcome]) for outcome in OUTCOMES]
        lines.append(f"| {name} | " + " | ".join(cells)
                     + f" | {passed}/{applicable} ({percent}) |")

    failing = [t for t in tests if bucket(t) not in ("passed", "not applicable")]
    causes = collections.Counter(cause(t["outcome"], t["message"]) for t in failing)
    lines += ["", "## Causes", "", "| cause | tests |", "|---|---|"]
    lines += [f"| {label} | {n} |" for label, n in causes.most_common()]

    lines += ["", "## Tests that do not pass", ""]
    for name in sorted(counts):
        rows = sorted(
            (cause(t["outcome"], t["message"]), t["test"], t)
            for t in failing if t["file"] == name
        )
        if not rows:
            continue
        lines += [f"### {name}", "", "| cause | test | outcome | first line of the error |",
                  "|---|---|---|---|"]
        lines += [
            f"| {label} | {_code(test_name)} | {t['outcome']} | {_code(_cut(t['message']))} |"
            for label, test_name, t in rows
        ]
        lines.append("")

    reasons = collections.Counter(
        (t["file"], t["not_applicable"]) for t in tests if t["not_applicable"]
    )
    if reasons:
        lines += ["## Not applicable", "", "| test file | reason | tests |", "|---|---|---|"]
        lines += [f"| {name} | {reason} | {n} |" for (name, reason), n in sorted(reasons.items())]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def write_doc(block: str) -> None:
    """Replace the generated block of the page, creating the page if needed."""
    if os.path.exists(DOC):
        with open(DOC, encoding="utf-8") as f:
            text = f.read()
        if BEGIN not in text or END not in text:
            raise SystemExit(f"{DOC}: the markers {BEGIN} / {END} are missing")
        head, rest = text.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
    else:
        head, tail = INTRO, "\n"
    with open(DOC, "w", encoding="utf-8") as f:
        f.write(f"{head}{BEGIN}\n\n{block}\n{END}{tail}")


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=sorted(TEST_MODULES), help="one test file only")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression, passed through")
    parser.add_argument("--no-write", action="store_true", help="print only, page untouched")
    parser.add_argument("--save-report", metavar="PATH",
                        help="also keep the plugin's JSON report (every test's outcome) there")
    parser.add_argument(
        "--batch-size", type=int, help="default batch_size of the SGD estimators (e.g. 1)"
    )
    parser.add_argument(
        "--dtype", choices=["float32", "float64"], help="default dtype of all four estimators"
    )
    args = parser.parse_args(argv)
    defaults = substituted_defaults(args.batch_size, args.dtype)

    modules = [TEST_MODULES[args.only]] if args.only else list(TEST_MODULES.values())
    with tempfile.TemporaryDirectory(prefix="sklearn_drop_in_") as workdir:
        report = os.path.join(workdir, "report.json")
        begin = time.perf_counter()
        exit_code = run_pytest(modules, args.keyword, report, workdir, defaults)
        seconds = time.perf_counter() - begin
        # 0: all passed, 1: some failed, 5: nothing selected; others: pytest itself failed.
        if exit_code not in (0, 1, 5) or not os.path.exists(report):
            print(f"pytest failed to run (exit code {exit_code})", file=sys.stderr)
            return 2
        with open(report, encoding="utf-8") as f:
            payload = json.load(f)
        if args.save_report:
            shutil.copyfile(report, args.save_report)

    print()
    counts = tally(payload["tests"])
    for name in sorted(counts):
        passed, applicable, percent = share(counts[name])
        print(f"{name}: {passed}/{applicable} passed ({percent}); "
              + ", ".join(f"{outcome} {counts[name][outcome]}" for outcome in OUTCOMES[1:]))
    for leak in payload["unsubstituted"]:
        print(f"NOT SUBSTITUTED: {leak}")
    for error in payload["collect_errors"]:
        print(f"COLLECTION ERROR: {error['nodeid']}: {error['message']}")

    selection = ", ".join(m.rsplit(".", 1)[1] + ".py" for m in modules)
    if args.keyword:
        selection += f", -k {args.keyword!r}"
    for family, values in defaults.items():
        selection += f", {family} defaults " + ", ".join(f"{k}={v}" for k, v in values.items())
    if not args.no_write:
        write_doc(render(payload, selection, seconds, exit_code))
        print(f"wrote {os.path.relpath(DOC, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
