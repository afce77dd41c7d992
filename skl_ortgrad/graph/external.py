"""Tensors stored as external data: read only from a folder the caller names.

An ONNX tensor may keep its values in another file (``data_location = EXTERNAL``, a
``location`` relative to the model). onnx and onnxruntime resolve that location against
a base folder, the current directory when none is given: a crafted model can then make
any function that reads its weights load a file of the current directory into them. Every
public function of skl_ortgrad that takes a model goes through
:func:`check_external_data` first: external tensors are refused unless the caller says
where they may be read from, and even then only regular files inside that folder are read.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from onnx import AttributeProto, GraphProto, ModelProto, NodeProto, TensorProto
from onnx.external_data_helper import load_external_data_for_tensor

from skl_ortgrad.graph.model import copied_model


def _graph_tensors(graph: GraphProto) -> Iterator[tuple[str, TensorProto]]:
    """(description, tensor) for every tensor of ``graph`` and of its subgraphs."""
    for init in graph.initializer:
        yield f"initializer {init.name!r}", init
    for sparse in graph.sparse_initializer:
        yield f"sparse initializer {sparse.values.name!r}", sparse.values
        yield f"sparse initializer {sparse.values.name!r} (indices)", sparse.indices
    yield from _node_tensors(graph.node)


def _node_tensors(nodes: Iterable[NodeProto]) -> Iterator[tuple[str, TensorProto]]:
    """(description, tensor) for every tensor held by an attribute of ``nodes``."""
    for node in nodes:
        for attribute in node.attribute:
            where = f"attribute {attribute.name!r} of node {node.name or node.op_type!r}"
            if attribute.type == AttributeProto.TENSOR:
                yield where, attribute.t
            for tensor in attribute.tensors:
                yield where, tensor
            subgraphs = list(attribute.graphs) + ([attribute.g] if attribute.HasField("g") else [])
            for sub in subgraphs:
                yield from _graph_tensors(sub)


def _model_tensors(model: ModelProto) -> Iterator[tuple[str, TensorProto]]:
    """(description, tensor) for every tensor of ``model``: its graph, its training
    information and the attributes of its functions' nodes."""
    yield from _graph_tensors(model.graph)
    for info in model.training_info:
        yield from _graph_tensors(info.initialization)
        yield from _graph_tensors(info.algorithm)
    for function in model.functions:
        yield from _node_tensors(function.node)


def external_tensors(model: ModelProto) -> list[tuple[str, TensorProto]]:
    """(description, tensor) of every tensor of ``model`` stored as external data."""
    return [
        (where, tensor) for where, tensor in _model_tensors(model)
        if tensor.data_location == TensorProto.EXTERNAL
    ]


def _location(tensor: TensorProto) -> str:
    return next((entry.value for entry in tensor.external_data if entry.key == "location"), "")


def _checked_path(where: str, location: str, base_dir: str) -> None:
    """Refuse a ``location`` that leaves ``base_dir`` or goes through a symbolic link.

    Raises
    ------
    ValueError
        If ``location`` is empty or absolute, has a ``..`` component, names a symbolic
        link (or goes through one) or anything but a regular file under ``base_dir``.
    """
    parts = location.replace("\\", "/").split("/")
    if not location or os.path.isabs(location) or ".." in parts:
        raise ValueError(
            f"The external data of {where} is at {location!r}: only a relative path "
            f"inside {base_dir!r} without '..' may be read."
        )
    path = base_dir
    for part in parts:
        path = os.path.join(path, part)
        if os.path.islink(path):
            raise ValueError(
                f"The external data of {where} is at {location!r}, through the symbolic "
                f"link {path!r}: symbolic links are not followed."
            )
    if not os.path.isfile(path):
        raise ValueError(
            f"The external data of {where} is at {location!r}, which is not a file "
            f"in {base_dir!r}."
        )


def check_external_data(model: ModelProto, base_dir: str | None = None) -> ModelProto:
    """Return ``model`` with no tensor stored as external data, reading only from ``base_dir``.

    Parameters
    ----------
    model : onnx.ModelProto
        The model; it is not modified.
    base_dir : str, optional
        The folder external data may be read from (usually the folder of the model
        file). None refuses any external tensor.

    Returns
    -------
    onnx.ModelProto
        ``model`` itself when it holds no external tensor, else a copy whose external
        tensors hold their values.

    Raises
    ------
    ValueError
        If a tensor is stored as external data and ``base_dir`` is None, or if its
        location is not a regular file inside ``base_dir`` reached without ``..`` or
        symbolic links (see :func:`_checked_path`), or if the file is too short.
    """
    found = external_tensors(model)
    if not found:
        return model
    if base_dir is None:
        where, tensor = found[0]
        raise ValueError(
            f"The model stores {where} as external data (location "
            f"{_location(tensor)!r}); external data is read only when the caller passes the "
            "folder it may be read from (external_data_dir=...)."
        )
    base_dir = os.path.abspath(base_dir)
    if not os.path.isdir(base_dir):
        raise ValueError(f"external_data_dir={base_dir!r} is not a folder.")
    copy = copied_model(model)
    for where, tensor in external_tensors(copy):
        _checked_path(where, _location(tensor), base_dir)
        load_external_data_for_tensor(tensor, base_dir)
    return copy
