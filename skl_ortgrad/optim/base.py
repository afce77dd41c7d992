"""Base class of the pluggable training objects: learning rates, losses and penalties.

Every training object is a scikit-learn estimator in the narrow sense of
:class:`sklearn.base.BaseEstimator`: ``__init__`` only stores its parameters, so
``get_params``, ``set_params``, :func:`sklearn.base.clone`, the short ``repr`` (only the
parameters that differ from their defaults) and nested parameters such as
``learning_rate__eta0`` in :class:`sklearn.model_selection.GridSearchCV` all come for free.

Each *family* (learning rate, loss, penalty) also owns an alias registry so that an estimator
parameter may be ``None``, a number, a string or an instance, and
:meth:`BaseLearningObject.select` turns it into an instance. The mechanism is written once
here; a family only declares itself (``class BaseLearningRate(BaseLearningObject,
family="learning rate")``) and registers its aliases, its default and its meaning of a float.
"""

from __future__ import annotations

import functools
import numbers
from abc import ABCMeta, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

import onnx
from sklearn.base import BaseEstimator

from skl_ortgrad._params import MemoizedParamNames

__all__ = ["BaseLearningObject"]

# A recipe to build an object: the class and the keyword arguments of its constructor.
# Recipes instead of shared instances because the objects are mutable (set_params):
# every call to select must return a fresh one.
_Recipe = tuple[type, dict[str, Any]]


def _validated(init: Callable[..., None]) -> Callable[..., None]:
    """``init`` followed by the object's :meth:`BaseLearningObject._validate`, only when
    ``init`` is the constructor of the object's own class (a subclass calling its
    parent's ``__init__`` validates once, when all its attributes are set)."""

    @functools.wraps(init)
    def checked(self: BaseLearningObject, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        if type(self).__init__ is checked:
            self._validate()

    return checked


class BaseLearningObject(MemoizedParamNames, BaseEstimator, metaclass=ABCMeta):
    """Base class of learning rates, losses and penalties.

    Subclasses follow the scikit-learn convention: ``__init__`` stores its arguments as
    attributes of the same name and computes nothing, so that :func:`sklearn.base.clone`
    and ``set_params`` behave. The values are checked twice: once the object is built
    (:meth:`_validate`, called after the most derived ``__init__``, so that
    ``LearningRateSGD("EXC")`` fails where it is written, as the seed API documents), and
    when the object is used, since ``set_params`` changes values without ``__init__``.

    A direct subclass declared with the ``family`` keyword becomes the root of a family and
    gets its own alias registry::

        class BaseLearningRate(BaseLearningObject, family="learning rate"):
            ...

        BaseLearningRate.register_alias(("sgd", "SGD"), LearningRateSGD)
        BaseLearningRate.register_default(LearningRateSGD)
        BaseLearningRate.register_float(LearningRateSGD, "eta0", learning_rate="constant")

    after which ``BaseLearningRate.select(value)`` accepts ``None``, a real number, one of
    the registered strings or an instance of the family.
    """

    # Set by __init_subclass__ on the root class of each family, inherited by its members.
    _family_root: ClassVar[type[BaseLearningObject] | None] = None
    _family_name: ClassVar[str] = "learning object"
    _aliases: ClassVar[dict[str, _Recipe]] = {}
    _default: ClassVar[_Recipe | None] = None
    _float: ClassVar[tuple[type, str, dict[str, Any]] | None] = None

    def __init_subclass__(cls, family: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:
            cls.__init__ = _validated(cls.__dict__["__init__"])
        if family is not None:
            # A new registry per family: members of two families must never see each
            # other's aliases, which would happen with one dictionary on the base class.
            cls._family_root = cls
            cls._family_name = family
            cls._aliases = {}
            cls._default = None
            cls._float = None

    def _validate(self) -> None:
        """Raise ``ValueError`` for an invalid parameter (nothing to check by default)."""

    @abstractmethod
    def build_onnx_function(self, opset: int, device: str, *args: Any) -> onnx.ModelProto:
        """Return the ONNX graph that computes what this object contributes to training.

        Parameters
        ----------
        opset : int
            Version of the main ONNX domain the graph must use (at most 21, the newest
            version onnxruntime 1.19 accepts).
        device : str
            Device the graph will run on (``"cpu"``, ``"cuda"``, ``"cuda:1"``).
        *args
            Family specific arguments (number of tensors, dtype, ...).

        Returns
        -------
        onnx.ModelProto
            A model with IR version 10 built by :func:`skl_ortgrad.graph.model.make_model`.
        """

    # ------------------------------------------------------------------ registry
    @classmethod
    def _root(cls) -> type[BaseLearningObject]:
        root = cls._family_root
        if root is None:
            raise TypeError(
                f"{cls.__name__} belongs to no family: declare its base class with "
                "'family=...' to use aliases."
            )
        return root

    @classmethod
    def register_alias(cls, names: str | tuple[str, ...], klass: type, **params: Any) -> None:
        """Register one or several string aliases for ``klass(**params)``.

        Parameters
        ----------
        names : str or tuple of str
            The aliases, matched exactly (case sensitive).
        klass : type
            A subclass of the family root.
        **params
            Constructor arguments; a fresh object is built for every call to :meth:`select`.
        """
        root = cls._root()
        if not (isinstance(klass, type) and issubclass(klass, root)):
            raise TypeError(f"{klass!r} is not a {root._family_name} ({root.__name__}).")
        for name in (names,) if isinstance(names, str) else names:
            root._aliases[name] = (klass, dict(params))

    @classmethod
    def register_default(cls, klass: type, **params: Any) -> None:
        """Register the object ``select(None)`` returns: ``klass(**params)``."""
        root = cls._root()
        root._default = (klass, dict(params))

    @classmethod
    def register_float(cls, klass: type, param: str, **params: Any) -> None:
        """Register the meaning of a real number ``x``: ``klass(**{param: x}, **params)``."""
        root = cls._root()
        root._float = (klass, param, dict(params))

    @classmethod
    def aliases(cls) -> dict[str, BaseLearningObject]:
        """Return every registered alias with the object it stands for (fresh objects)."""
        root = cls._root()
        return {name: klass(**params) for name, (klass, params) in root._aliases.items()}

    @classmethod
    def select(cls, value: Any, **params: Any) -> BaseLearningObject:
        """Turn an estimator parameter into an object of this family.

        Parameters
        ----------
        value : None, real number, str or instance
            * ``None``: the family's default object;
            * a real number (not a bool): the family's documented object for a number,
              when the family accepts numbers;
            * a string: the object registered under that alias;
            * an instance of the family: returned as is (not copied, so that the caller
              sees the same object it passed, as scikit-learn does with sub-estimators).
        **params
            Constructor arguments of the object built from ``None`` or a string, over the
            alias's own (``select("elastic", l1_weight=0.1, l2_weight=0.9)``); not
            accepted with an instance or a number.

        Returns
        -------
        BaseLearningObject
            An instance of the family root class.

        Raises
        ------
        ValueError
            If ``value`` is a string that is not a registered alias; the message lists the
            valid aliases.
        TypeError
            If ``value`` has any other type, or is a number for a family that accepts none.
        """
        root = cls._root()
        if params and (isinstance(value, root) or isinstance(value, numbers.Real)):
            raise TypeError(
                f"Keyword arguments {sorted(params)} apply to the {root._family_name} built "
                f"from an alias, not to {value!r}."
            )
        if value is None:
            if root._default is None:
                raise TypeError(f"None is not a valid {root._family_name}.")
            klass, defaults = root._default
            return klass(**{**defaults, **params})
        if isinstance(value, root):
            return value
        # bool is an int for Python; True as a learning rate is certainly a mistake.
        if isinstance(value, numbers.Real) and not isinstance(value, bool):
            if root._float is None:
                raise TypeError(
                    f"A number ({value!r}) is not a valid {root._family_name}; use one of "
                    f"{sorted(root._aliases)} or an instance of {root.__name__}."
                )
            klass, param, params = root._float
            return klass(**{param: float(value)}, **params)
        if isinstance(value, str):
            try:
                klass, defaults = root._aliases[value]
            except KeyError:
                raise ValueError(
                    f"Unknown {root._family_name} {value!r}; valid aliases are "
                    f"{sorted(root._aliases)}."
                ) from None
            return klass(**{**defaults, **params})
        raise TypeError(
            f"Cannot build a {root._family_name} from {type(value).__name__} {value!r}: "
            f"expected None, a str among {sorted(root._aliases)}"
            f"{', a float' if root._float is not None else ''} or an instance of "
            f"{root.__name__}."
        )
