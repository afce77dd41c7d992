"""``import skl_ortgrad`` loads neither onnxruntime nor skl2onnx; the estimators' skl2onnx
converters are registered as soon as skl2onnx is imported, whoever imports it, before
``skl2onnx.to_onnx(pipeline, X)`` can run.

Each test runs a fresh interpreter: in this one, both are imported already.
"""

import subprocess
import sys


def _python(code):
    result = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    return result.stdout


_REGISTERED = (
    "import skl2onnx\n"
    "for cls in (skl_ortgrad.OnnxSGDClassifier, skl_ortgrad.OnnxSGDRegressor,\n"
    "            skl_ortgrad.OnnxMLPClassifier, skl_ortgrad.OnnxMLPRegressor,\n"
    "            skl_ortgrad.OnnxGradientClassifier, skl_ortgrad.OnnxGradientRegressor):\n"
    "    assert skl2onnx.get_model_alias(cls) == 'SklOrtgrad' + cls.__name__\n"
)

_EXPORT = (
    "import numpy as np\n"
    "from sklearn.datasets import load_iris\n"
    "from sklearn.pipeline import make_pipeline\n"
    "from sklearn.preprocessing import StandardScaler\n"
    "from onnxruntime import InferenceSession\n"
    "X, y = load_iris(return_X_y=True)\n"
    "pipe = make_pipeline(StandardScaler(), skl_ortgrad.OnnxSGDClassifier(\n"
    "    max_iter=3, tol=None, random_state=0)).fit(X, y)\n"
    "onx = skl2onnx.to_onnx(pipe, X[:1].astype(np.float32), target_opset=21,\n"
    "                       options={'zipmap': False})\n"
    "session = InferenceSession(onx.SerializeToString(), providers=['CPUExecutionProvider'])\n"
    "labels = session.run(['label'], {'X': X.astype(np.float32)})[0]\n"
    "assert (labels == pipe.predict(X)).all()\n"
)


def test_import_loads_neither_and_skl2onnx_imported_after_finds_the_converters():
    """The public names import without onnxruntime and skl2onnx; a later ``import
    skl2onnx`` registers the converters, both packages keep their own loader, and the
    finder leaves ``sys.meta_path`` once both are imported."""
    _python(
        "import sys\n"
        "import skl_ortgrad\n"
        "from skl_ortgrad import OnnxSGDClassifier, OnnxMLPRegressor, SquareLearningLoss\n"
        "from skl_ortgrad import _import_hooks\n"
        "loaded = {'onnxruntime', 'skl2onnx'} & set(sys.modules)\n"
        "assert not loaded, loaded\n"
        "assert _import_hooks._FINDER in sys.meta_path\n"
        + _REGISTERED + _EXPORT +
        "import onnxruntime\n"
        "for module in (onnxruntime, skl2onnx):\n"
        "    assert type(module.__loader__).__name__ == 'SourceFileLoader'\n"
        "    assert module.__spec__.loader is module.__loader__\n"
        # onnxruntime-training's own package, left for later without torch (_logging);
        # it needs torch: where torch is not installed, its import fails as it does
        # without skl_ortgrad.
        "if _import_hooks._WAITING:\n"
        "    assert list(_import_hooks._WAITING) == ['onnxruntime.training']\n"
        "    try:\n"
        "        import onnxruntime.training\n"
        "    except ModuleNotFoundError as error:\n"
        "        assert error.name == 'torch', error\n"
        "assert _import_hooks._FINDER not in sys.meta_path and not _import_hooks._WAITING\n"
    )


def test_onnxruntime_s_import_leaves_torch_out_and_importable():
    """The first fit imports onnxruntime without torch (onnxruntime-training's import
    would load it where it is installed); ``onnxruntime.training`` (which imports torch)
    imports in full afterwards, the root logger kept as it was, where torch is installed;
    where it is not, that import fails on torch, as it does without skl_ortgrad."""
    _python(
        "import importlib.util, logging, sys\n"
        "import skl_ortgrad\n"
        "from skl_ortgrad import _import_hooks\n"
        "installed = importlib.util.find_spec('torch') is not None\n"
        "skl_ortgrad.OnnxSGDRegressor(max_iter=2).fit([[0.0], [1.0]], [0.0, 1.0])\n"
        "assert 'onnxruntime' in sys.modules and 'torch' not in sys.modules\n"
        "if 'onnxruntime.training' in _import_hooks._WAITING:\n"
        "    try:\n"
        "        import onnxruntime.training\n"
        "    except ModuleNotFoundError as error:\n"
        "        assert not installed and error.name == 'torch', error\n"
        "    else:\n"
        "        assert installed and 'torch' in sys.modules\n"
        "        assert logging.getLogger().handlers == []\n"
        "        assert 'artifacts' in vars(onnxruntime.training)\n"
    )


def test_refused_imports_fail_in_the_refusing_thread_only():
    _python(
        "import sys, threading\n"
        "from skl_ortgrad import _import_hooks\n"
        "sys.modules.pop('colorsys', None)\n"
        "imported = []\n"
        "with _import_hooks.refused('colorsys'):\n"
        "    try:\n"
        "        import colorsys\n"
        "    except ModuleNotFoundError as error:\n"
        "        assert error.name == 'colorsys'\n"
        "    else:\n"
        "        raise AssertionError('imported')\n"
        "    thread = threading.Thread(target=lambda: imported.append(__import__('colorsys')))\n"
        "    thread.start()\n"
        "    thread.join()\n"
        "assert imported[0].rgb_to_hsv(1, 0, 0) == (0.0, 1.0, 1)\n"
        "sys.modules.pop('colorsys')\n"
        "import colorsys\n"
        "assert len(sys.meta_path) == len(set(map(id, sys.meta_path)))\n"
        "assert not any(type(f).__name__ == '_Refusing' for f in sys.meta_path)\n"
    )


def test_converters_are_registered_when_skl2onnx_was_imported_before():
    _python("import skl2onnx\nimport skl_ortgrad\n" + _REGISTERED + _EXPORT)


def test_sgd_fits_and_scores_without_skl2onnx_then_converts_when_needed():
    """A fit of the SGD models and their scores run hand-built score graphs (a grid
    search's workers never load skl2onnx); ``predict_proba`` converts the full graph:
    skl2onnx comes in through the package, and the export finds the converters."""
    _python(
        "import sys\n"
        "import numpy as np\n"
        "import skl_ortgrad\n"
        "from sklearn.datasets import load_iris\n"
        "X, y = load_iris(return_X_y=True)\n"
        "for model in (skl_ortgrad.OnnxSGDClassifier(max_iter=3, loss='log_loss'),\n"
        "              skl_ortgrad.OnnxSGDRegressor(max_iter=3)):\n"
        "    model.fit(X, y).score(X, y)\n"
        "    model.partial_fit(X, y)\n"
        "assert 'onnxruntime' in sys.modules and 'skl2onnx' not in sys.modules\n"
        "skl_ortgrad.OnnxSGDClassifier(max_iter=3, loss='log_loss').fit(X, y).predict_proba(X)\n"
        "assert 'skl2onnx' in sys.modules\n"
        "import skl2onnx\n"
        + _REGISTERED + _EXPORT
    )


def test_after_import_calls_back_once():
    """A package imported later: called right after its import; imported already:
    called at once. Either way once."""
    _python(
        "import sys\n"
        "from skl_ortgrad import _import_hooks\n"
        "import json\n"
        "calls = []\n"
        "_import_hooks.after_import('json', lambda module: calls.append(module.dumps(1)))\n"
        "assert calls == ['1']\n"
        "sys.modules.pop('colorsys', None)\n"
        "_import_hooks.after_import('colorsys', lambda module: calls.append(module.__name__))\n"
        "assert calls == ['1']\n"
        "import colorsys\n"
        "import colorsys\n"
        "assert calls == ['1', 'colorsys'], calls\n"
        "assert colorsys.rgb_to_hsv(1, 0, 0) == (0.0, 1.0, 1)\n"
    )
