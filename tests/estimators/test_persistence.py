"""skl_ortgrad.save / load: one ONNX file that onnxruntime serves as is, that resumes
training bit for bit, that runs no code when loaded (anything else is refused), whose
every byte is covered by a digest (one byte changed anywhere: refused), and that a
process killed while saving never leaves torn. Pipelines: test_pipeline_persistence.py."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import re
import signal
import subprocess
import sys
import time

import numpy as np
import onnx
import pandas as pd
import pytest
from _estimators import ALL_ESTIMATORS
from _file_edits import flip_every_byte
from onnx import numpy_helper
from onnx.external_data_helper import set_external_data
from onnxruntime import InferenceSession
from sklearn.base import is_classifier
from sklearn.datasets import load_iris
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LinearRegression, Ridge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler

from skl_ortgrad import (
    LearningRateSGDNesterov,
    NegLogLearningLoss,
    OnnxGradientRegressor,
    OnnxMLPClassifier,
    OnnxSGDClassifier,
    OnnxSGDRegressor,
    load,
    save,
)
from skl_ortgrad.estimators import atomic_file, integrity, persistence

_X, Y = load_iris(return_X_y=True)
X = (_X - _X.mean(axis=0)) / _X.std(axis=0)
Y_REG = X @ np.array([1.0, -2.0, 0.5, 3.0])


def _targets(model):
    return Y if is_classifier(model) else Y_REG


def _fitted(estimator, **params):
    if estimator is OnnxSGDClassifier:
        # A loss with predict_proba, which _outputs compares.
        params = {"loss": "log_loss", **params}
    model = estimator(**{"max_iter": 2, "tol": None, "random_state": 0, "batch_size": 16,
                         **params})
    model.fit(X, _targets(model))
    model.partial_fit(X[:50], _targets(model)[:50])
    return model


def _outputs(model, X_):
    methods = ["predict"] + (["predict_proba", "decision_function"]
                             if is_classifier(model) else [])
    return [getattr(model, method)(X_) for method in methods]


def _assert_same_arrays(actual, expected):
    assert len(actual) == len(expected)
    for a, b in zip(actual, expected, strict=True):
        np.testing.assert_array_equal(a, b)
        assert np.asarray(a).dtype == np.asarray(b).dtype


@pytest.mark.parametrize("estimator", ALL_ESTIMATORS)
def test_round_trip_predicts_the_same_and_resumes_bit_for_bit(tmp_path, estimator):
    model = _fitted(estimator)
    path = tmp_path / "model.onnx"
    save(model, path)
    loaded = load(path)
    assert type(loaded) is type(model) and repr(loaded) == repr(model)
    assert {k: repr(v) for k, v in loaded.get_params().items()} == {
        k: repr(v) for k, v in model.get_params().items()}
    _assert_same_arrays(_outputs(loaded, X), _outputs(model, X))
    for name in ("t_", "n_iter_", "loss_curve_", "n_features_in_", "best_loss_"):
        assert getattr(loaded, name) == getattr(model, name), name
    for name in ("classes_", "coef_", "intercept_"):
        if hasattr(model, name):
            _assert_same_arrays([getattr(loaded, name)], [getattr(model, name)])
    _assert_same_arrays(loaded.optimizer_.lr_state_, model.optimizer_.lr_state_)
    # Nothing lost: saved again, the loaded estimator writes the same bytes.
    save(loaded, tmp_path / "again.onnx")
    assert (tmp_path / "again.onnx").read_bytes() == path.read_bytes()
    # Two shuffled partial_fit calls: the same as the pickled estimator's, bit for bit.
    pickled = pickle.loads(pickle.dumps(model))
    y = _targets(model)
    for copy in (pickled, loaded):
        copy.partial_fit(X[50:], y[50:])
        copy.partial_fit(X[:100], y[:100])
    _assert_same_arrays(loaded.optimizer_.weights_, pickled.optimizer_.weights_)
    _assert_same_arrays(loaded.optimizer_.lr_state_, pickled.optimizer_.lr_state_)
    assert (loaded.t_, loaded.n_iter_, loaded.loss_curve_) == (
        pickled.t_, pickled.n_iter_, pickled.loss_curve_)
    _assert_same_arrays(_outputs(loaded, X), _outputs(pickled, X))


@pytest.mark.parametrize("estimator", ALL_ESTIMATORS)
def test_the_file_is_served_by_onnxruntime_as_is(tmp_path, estimator):
    model = _fitted(estimator)
    path = tmp_path / "model.onnx"
    save(model, path)
    session = InferenceSession(str(path), providers=["CPUExecutionProvider"])
    reference = InferenceSession(model.to_onnx().SerializeToString(),
                                 providers=["CPUExecutionProvider"])
    feeds = {session.get_inputs()[0].name: X.astype(np.float32)}
    got = dict(zip([out.name for out in session.get_outputs()], session.run(None, feeds),
                   strict=True))
    _assert_same_arrays(list(got.values()), reference.run(None, feeds))
    if is_classifier(model):
        np.testing.assert_array_equal(got["label"], model.predict(X))
        np.testing.assert_allclose(got["probabilities"], model.predict_proba(X),
                                   rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_allclose(next(iter(got.values())).ravel(), model.predict(X),
                                   rtol=1e-5, atol=1e-6)


def test_float64_string_labels_feature_names_and_a_rate_object(tmp_path):
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    labels = np.array(["setosa", "versicolor", "virginica"])[Y]
    # The softmax cross-entropy: the former default for multiclass problems.
    softmax = NegLogLearningLoss(eps=0.0, probability_function="softmax")
    model = OnnxSGDClassifier(dtype=np.float64, random_state=1, max_iter=2, tol=None,
                              loss=softmax, learning_rate=LearningRateSGDNesterov(eta0=0.05))
    model.fit(frame, labels)
    save(model, tmp_path / "model.onnx")
    loaded = load(tmp_path / "model.onnx")
    assert loaded.dtype is np.float64 and loaded.optimizer_.weights_[0].dtype == np.float64
    assert isinstance(loaded.learning_rate, LearningRateSGDNesterov)
    assert loaded.learning_rate.get_params() == model.learning_rate.get_params()
    assert isinstance(loaded.loss, NegLogLearningLoss)
    assert loaded.loss.get_params() == model.loss.get_params()
    np.testing.assert_array_equal(loaded.feature_names_in_, model.feature_names_in_)
    _assert_same_arrays([loaded.classes_], [model.classes_])
    _assert_same_arrays(_outputs(loaded, frame), _outputs(model, frame))
    with pytest.raises(ValueError, match="Feature names must be in the same order"):
        loaded.predict(frame[["d", "c", "b", "a"]])


# -- what save refuses ----------------------------------------------------------------------


def test_save_refuses_what_the_format_cannot_hold(tmp_path):
    path = tmp_path / "model.onnx"
    with pytest.raises(NotFittedError):
        save(OnnxSGDRegressor(), path)
    with pytest.raises(ValueError, match=r"skl_ortgrad.save writes the estimators \[.*"
                                         r"'OnnxSGDRegressor'\] and Pipelines ending in "
                                         r"one, got LinearRegression"):
        save(LinearRegression().fit(X, Y_REG), path)
    shared = OnnxSGDRegressor(random_state=np.random.RandomState(0), max_iter=1).fit(X, Y_REG)
    with pytest.raises(ValueError, match=r"params\.random_state = RandomState\(MT19937\).*"
                                         r"cannot be saved.*Use pickle"):
        save(shared, path)
    function = OnnxGradientRegressor(make_pipeline(FunctionTransformer(np.log1p), Ridge()),
                                     max_iter=1)
    function.fit(X + 3, Y_REG)
    with pytest.raises(ValueError, match=r"params\.estimator\.params\.steps\[0\]\[1\]\.params"
                                         r"\.func = <ufunc 'log1p'> is a function "
                                         r"\(or a class\): code"):
        save(function, path)
    assert not any(tmp_path.iterdir())


def test_a_fine_tuned_pipeline_round_trips(tmp_path):
    """OnnxGradient* wrapping a pipeline of scikit-learn transformers (format 2)."""
    model = OnnxGradientRegressor(make_pipeline(StandardScaler(), Ridge()), max_iter=2,
                                  random_state=0).fit(X, Y_REG)
    save(model, tmp_path / "model.onnx")
    loaded = load(tmp_path / "model.onnx")
    assert repr(loaded) == repr(model)
    pickled = pickle.loads(pickle.dumps(model))
    for copy in (pickled, loaded):
        copy.partial_fit(X[50:], Y_REG[50:])
    _assert_same_arrays(loaded.optimizer_.weights_, pickled.optimizer_.weights_)
    _assert_same_arrays([loaded.predict(X)], [pickled.predict(X)])


def _raise(error):
    def fail(*args, **kwargs):
        raise error
    return fail


@pytest.mark.parametrize(("function", "error"), [
    ("replace", OSError("disk full")),
    ("fsync", OSError("I/O error")),
    ("replace", KeyboardInterrupt()),
], ids=["replace", "fsync", "interrupt"])
def test_a_failed_write_keeps_the_previous_file(tmp_path, monkeypatch, function, error):
    path = tmp_path / "model.onnx"
    first = _fitted(OnnxSGDRegressor)
    save(first, path)
    content = path.read_bytes()
    second = _fitted(OnnxSGDRegressor, random_state=1)
    monkeypatch.setattr(atomic_file.os, function, _raise(error))
    with pytest.raises(type(error)):
        save(second, path)
    assert path.read_bytes() == content
    assert [p.name for p in tmp_path.iterdir()] == ["model.onnx"]


def test_a_path_that_names_no_file_is_refused_before_anything_is_written(tmp_path,
                                                                         monkeypatch):
    model = _fitted(OnnxSGDRegressor)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    # An empty path would stand for the current folder: its temporary file would go to
    # the folder above, then the rename over a folder fail (IsADirectoryError).
    with pytest.raises(ValueError, match=r"^skl_ortgrad\.save cannot write to '': the path is "
                                         r"empty: give the file to write, such as "
                                         r"'model\.onnx'\.$"):
        save(model, "")
    for folder in (work, "sub/", tmp_path):
        with pytest.raises(ValueError, match=r"skl_ortgrad\.save cannot write to .*: '.*' is "
                                             r"a folder, not a file: give the file to write, "
                                             r"such as '.*model\.onnx'"):
            save(model, folder)
    with pytest.raises(FileNotFoundError):
        save(model, tmp_path / "missing" / "model.onnx")
    assert [p.name for p in tmp_path.iterdir()] == ["work"]
    assert not any(work.iterdir())


# -- what load refuses ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """The ONNX model of a saved OnnxSGDRegressor, fine-tuned Ridge and OnnxMLPClassifier."""
    folder = tmp_path_factory.mktemp("saved")
    models = {}
    for name, estimator in (("sgd", OnnxSGDRegressor), ("ridge", ALL_ESTIMATORS[4]),
                            ("mlp", OnnxMLPClassifier)):
        save(_fitted(estimator), folder / f"{name}.onnx")
        models[name] = onnx.load(folder / f"{name}.onnx")
    return models


def _document(model):
    entry = next(p for p in model.metadata_props if p.key == "skl_ortgrad")
    return entry, json.loads(entry.value)


def _set(document, path, value):
    """document[path[0]][path[1]]... = value (through ``$dict`` wrappers)."""
    node = document
    for key in path[:-1]:
        node = node[key]
        node = node.get("$dict", node) if isinstance(node, dict) else node
    node[path[-1]] = value


def _tensor_of(model, document, path):
    node = document
    for key in path:
        node = node[key]
        node = node.get("$dict", node) if isinstance(node, dict) else node
    name = node["$tensor"]
    return next(t for t in model.training_info[0].algorithm.initializer if t.name == name)


def _edit_json(path, value):
    def edit(model):
        entry, document = _document(model)
        _set(document, path, value)
        entry.value = json.dumps(document)
    return edit


def _tamper_weight(model):
    """The coefficient tensor replaced by one of another shape."""
    _, document = _document(model)
    tensor = _tensor_of(model, document, ["estimator", "optimizer", "weights_", 0])
    tensor.CopyFrom(numpy_helper.from_array(np.zeros((2, 2), dtype=np.float32), tensor.name))


def _external_state(model):
    """A state tensor moved to external data (a file next to the model)."""
    tensor = model.training_info[0].algorithm.initializer[0]
    set_external_data(tensor, "state.bin", offset=0, length=len(tensor.raw_data))
    tensor.ClearField("raw_data")


def _no_metadata(model):
    del model.metadata_props[:]


def _signed(model):
    """The bytes of ``model`` with a digest of their own, as save writes them: what a
    file edited on purpose, its digest recomputed, looks like."""
    kept = [prop for prop in model.metadata_props if prop.key != integrity.DIGEST_KEY]
    del model.metadata_props[:]
    model.metadata_props.extend(kept)
    return integrity.sign(model.SerializeToString())


# Each row edits a saved model and signs it again: the digest holds, the content does not.
_LOAD_ROWS = [
    ("no-metadata", "sgd", _no_metadata,
     r"no 'skl_ortgrad' metadata: the file was not written by skl_ortgrad\.save"),
    ("format", "sgd", _edit_json(["format"], 3),
     r"in format 3; skl_ortgrad [\d.]+ reads formats 1 and 2"),
    ("format-1-with-digest", "sgd", _edit_json(["format"], 1),
     r"format 1 with a digest: the file was damaged, or changed after skl_ortgrad\.save "
     r"wrote it"),
    ("fields", "sgd", _edit_json(["pipeline"], {}),
     r"the metadata is not a document of skl_ortgrad\.save"),
    ("class", "sgd", _edit_json(["estimator", "class"], "Popen"),
     r"'Popen' is not an estimator of skl_ortgrad"),
    ("classifier-as-regressor", "mlp", _edit_json(["estimator", "class"], "OnnxMLPRegressor"),
     r"the attributes are not those of a fitted OnnxMLPRegressor: a classes_"),
    ("training-object", "sgd",
     _edit_json(["estimator", "params", "learning_rate"],
                {"$learning": "system", "params": {"$dict": {"command": "rm -rf /"}}}),
     r"params\.learning_rate: 'system' is not a training object of skl_ortgrad"),
    ("sklearn-model", "ridge",
     _edit_json(["estimator", "params", "estimator"],
                {"$sklearn": "subprocess.Popen", "params": {"$dict": {}},
                 "fitted": {"$dict": {}}}),
     r"'subprocess\.Popen' is not one of the scikit-learn models the format holds"),
    ("unknown-tag", "sgd", _edit_json(["estimator", "params", "tol"], {"$pickle": "gASV"}),
     r"params\.tol: unknown tag '\$pickle'"),
    ("missing-tensor", "sgd",
     _edit_json(["estimator", "optimizer", "weights_", 0], {"$tensor": "nope"}),
     r"optimizer\.weights_\[0\]: no tensor named 'nope' in the file"),
    ("bad-parameter", "sgd", _edit_json(["estimator", "params", "max_iter"], -5),
     r"The 'max_iter' parameter of OnnxSGDRegressor must be an int in the range \[1, inf\)"),
    ("unknown-parameter", "sgd", _edit_json(["estimator", "params", "shell"], "sh"),
     r"unexpected keyword argument 'shell'"),
    ("dunder-attribute", "sgd", _edit_json(["estimator", "attributes", "__class__"], 1),
     r"attributes holds attributes that cannot be set: \['__class__'\]"),
    ("t", "sgd", _edit_json(["estimator", "optimizer", "t_"], 0),
     r"t_=0 is not a positive integer"),
    ("weight-shape", "sgd", _tamper_weight,
     r"weight 'coef' must be a float32 array of shape \(4, 1\)"),
    ("template", "sgd", _edit_json(["estimator", "template", "score"], "nowhere"),
     r"the template entry names results the graph does not have"),
    ("external-data", "sgd", _external_state,
     r"stores initializer 'skl_ortgrad\.state\.0' as external data"),
]


@pytest.mark.parametrize(("case", "which", "tamper", "message"), _LOAD_ROWS,
                         ids=[row[0] for row in _LOAD_ROWS])
def test_load_refuses_anything_but_what_save_writes(tmp_path, monkeypatch, saved, case,
                                                    which, tamper, message):
    model = onnx.ModelProto()
    model.CopyFrom(saved[which])
    tamper(model)
    path = tmp_path / "model.onnx"
    path.write_bytes(_signed(model))
    # A state file a crafted model could point to, in the current directory.
    (tmp_path / "state.bin").write_bytes(b"\0" * 64)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=(
            rf"^Cannot load '{re.escape(str(path))}' as a skl_ortgrad estimator: .*{message}")):
        load(path)


def test_load_refuses_a_file_that_is_not_onnx(tmp_path):
    path = tmp_path / "model.onnx"
    path.write_bytes(b"\x0a\xff\xff\xff\xff\x0f")
    with pytest.raises(ValueError, match=r"as a skl_ortgrad estimator: Error parsing message"):
        load(path)


# -- the integrity digest ---------------------------------------------------------------

_DAMAGED = r"the file was damaged, or changed after skl_ortgrad\.save wrote it\.$"


def _refused(path, message=_DAMAGED):
    return pytest.raises(ValueError, match=(
        rf"^Cannot load '{re.escape(str(path))}' as a skl_ortgrad estimator: .*{message}"))


def test_one_byte_changed_anywhere_is_refused(tmp_path):
    """Every position of the file, from the ONNX header through the graph, its weights,
    the JSON document and the state tensors to the digest itself: before the digest, 76
    of 126 changed bytes loaded (a shuffling state changed, weights that no longer matched
    the graph that predicts, n_iter_ renamed n_3ter_, predictions off by 1e23)."""
    model = _fitted(OnnxSGDClassifier)
    path = tmp_path / "model.onnx"
    save(model, path)
    messages = flip_every_byte(path, load)
    assert len(messages) == len(path.read_bytes())
    assert [position for position, m in messages.items() if m is None] == []
    expected = re.compile(rf"^Cannot load '{re.escape(str(path))}' as a skl_ortgrad "
                          rf"estimator: .*{_DAMAGED}")
    assert [m for m in messages.values() if not expected.match(m)] == []
    # Most changes break the digest; those in the digest's own key leave a file without
    # one, which format 2 never is.
    assert {m.split(": ", 1)[1].split(":")[0] for m in messages.values()} == {
        "its content does not match its integrity digest",
        "it has no integrity digest, which every file of format 2 ends with"}
    _assert_same_arrays(_outputs(load(path), X), _outputs(model, X))


def test_an_edited_class_name_is_refused(tmp_path):
    """A classifier whose class name is edited into a regressor's (the same length with
    a space more: the protobuf and the JSON stay valid) used to load and predict class
    indices as floats."""
    path = tmp_path / "model.onnx"
    save(_fitted(OnnxMLPClassifier), path)
    data = path.read_bytes()
    assert data.count(b'"class": "OnnxMLPClassifier"') == 1
    path.write_bytes(data.replace(b'"class": "OnnxMLPClassifier"',
                                  b'"class":  "OnnxMLPRegressor"'))
    with _refused(path, r"its content does not match its integrity digest: " + _DAMAGED):
        load(path)
    # Edited through onnx: the digest is no longer the file's last bytes.
    path.write_bytes(data)
    model = onnx.load(path)
    entry, document = _document(model)
    document["estimator"]["class"] = "OnnxMLPRegressor"
    entry.value = json.dumps(document)
    onnx.save(model, path)
    with _refused(path, r"it has no integrity digest, which every file of format 2 ends "
                        r"with: " + _DAMAGED):
        load(path)


RELEASE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "release-0.1.0",
                       "sgd_regressor.onnx")


def _edited_release(edit):
    model = onnx.load(RELEASE)
    edit(model)
    return model.SerializeToString()


def _release_version(version):
    def edit(model):
        entry, document = _document(model)
        document["version"] = version
        entry.value = json.dumps(document)
    return edit


def _extra_metadata(model):
    model.metadata_props.add(key="note", value="x")


_LEGACY_ROWS = [
    ("version", _edited_release(_release_version("0.1.1"))),
    ("metadata", _edited_release(_extra_metadata)),
    # ir_version written twice: protobuf keeps the last, and writes it back once.
    ("not-canonical", b"\x08\x0a" + open(RELEASE, "rb").read()),
]


@pytest.mark.parametrize(("case", "data"), _LEGACY_ROWS, ids=[row[0] for row in _LEGACY_ROWS])
def test_a_file_without_digest_loads_only_as_release_0_1_0_wrote_it(tmp_path, case, data):
    """Files of format 1 (skl_ortgrad 0.1.0) have no digest: they load in exactly that
    release's layout (tests/test_release_fixtures.py), and nothing else does."""
    assert isinstance(load(RELEASE), OnnxSGDRegressor)
    path = tmp_path / "model.onnx"
    path.write_bytes(data)
    with _refused(path, r"it has no integrity digest, which files have since format 2, and "
                        r"is not a file of format 1 as skl_ortgrad 0\.1\.0 wrote it: "
                        + _DAMAGED):
        load(path)


def test_a_file_of_format_2_without_its_digest_is_refused(tmp_path):
    path = tmp_path / "model.onnx"
    save(_fitted(OnnxSGDRegressor), path)
    path.write_bytes(path.read_bytes()[:-integrity.TRAILER_SIZE])
    with _refused(path, r"it has no integrity digest, which every file of format 2 ends "
                        r"with: " + _DAMAGED):
        load(path)


# -- kill -9 while saving -------------------------------------------------------------------

# The child imports only the atomic writer (the package's import would cost a second and
# a half per trial) and writes the saved files' bytes in a loop over three names.
_WRITER = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("atomic_file", sys.argv[1])
writer = importlib.util.module_from_spec(spec)
spec.loader.exec_module(writer)
folder, versions = sys.argv[2], [open(path, "rb").read() for path in sys.argv[3:]]
i = 0
while True:
    writer.write_atomically(f"{folder}/model_{i % 3}.onnx", versions[i % len(versions)])
    if i == 2:
        print("ready", flush=True)
    i += 1
"""
_TEMPORARY = re.compile(r"^\.model_\d\.onnx\.[0-9a-f]{16}\.tmp$")


def test_kill_9_while_saving_never_leaves_a_torn_file(tmp_path):
    """50 processes writing saves of an MLP of 70k weights (1.4 MB files) in a loop,
    killed at random times: every model file present is one of the saves, whole, and
    loads; only hidden temporary files may be left, and some are (kills landed in the
    middle of writes)."""
    rng = np.random.RandomState(0)
    features = rng.normal(size=(200, 20))
    labels = rng.randint(0, 3, 200)
    model = OnnxMLPClassifier(hidden_layer_sizes=(256, 256), max_iter=1, random_state=0)
    model.fit(features, labels)
    versions = []
    for i in range(2):
        save(model, tmp_path / f"version{i}.onnx")
        versions.append(tmp_path / f"version{i}.onnx")
        model.partial_fit(features, labels)
    contents = [path.read_bytes() for path in versions]
    predictions = [load(path).predict_proba(features) for path in versions]
    interrupted = 0
    for trial in range(50):
        folder = tmp_path / f"trial{trial}"
        folder.mkdir()
        child = subprocess.Popen(
            [sys.executable, "-c", _WRITER, atomic_file.__file__, str(folder),
             *map(str, versions)], stdout=subprocess.PIPE)
        try:
            assert child.stdout.readline() == b"ready\n"
            time.sleep(rng.uniform(0, 0.05))
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
            child.stdout.close()
        files = sorted(folder.glob("*.onnx"))
        assert [path.name for path in files] == [f"model_{i}.onnx" for i in range(3)]
        for path in files:
            assert path.read_bytes() in contents, path
        index = contents.index(files[trial % 3].read_bytes())
        np.testing.assert_array_equal(load(files[trial % 3]).predict_proba(features),
                                      predictions[index])
        leftovers = [path.name for path in folder.iterdir() if path.suffix != ".onnx"]
        assert all(_TEMPORARY.match(name) for name in leftovers), leftovers
        interrupted += bool(leftovers)
    assert interrupted, "no kill landed while a file was being written"


def test_document_names_the_format_and_version(tmp_path):
    save(_fitted(OnnxSGDRegressor), tmp_path / "model.onnx")
    model = onnx.load(tmp_path / "model.onnx")
    _, document = _document(model)
    assert document["format"] == persistence.FORMAT == 2
    assert document["estimator"]["class"] == "OnnxSGDRegressor"
    assert [info.algorithm.name for info in model.training_info] == [persistence.STATE_GRAPH]
    onnx.checker.check_model(model, full_check=True)
    # The digest: the SHA-256 of every byte before its own entry, the file's last bytes.
    assert [prop.key for prop in model.metadata_props] == ["skl_ortgrad", "skl_ortgrad.sha256"]
    data = (tmp_path / "model.onnx").read_bytes()
    digest = model.metadata_props[1].value
    assert digest == hashlib.sha256(data[:-integrity.TRAILER_SIZE]).hexdigest()
    assert data.endswith(digest.encode())
