"""Recording the calls of a method under test."""

from __future__ import annotations

from typing import Any


def record_calls(monkeypatch: Any, owner: type, name: str) -> list[Any]:
    """Patch method ``name`` of ``owner`` to record its first argument after ``self``,
    then run as before; return the list of recorded arguments."""
    calls: list[Any] = []
    original = getattr(owner, name)

    def recorded(self: Any, argument: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(argument)
        return original(self, argument, *args, **kwargs)

    monkeypatch.setattr(owner, name, recorded)
    return calls


def called_with(monkeypatch: Any, owner: Any, name: str, value: Any, call: Any) -> Any:
    """``call()`` with attribute ``name`` of ``owner`` set to ``value`` meanwhile."""
    with monkeypatch.context() as patch:
        patch.setattr(owner, name, value)
        return call()
