"""Ctrl-C held until the end of the block (the trainer's batch boundary)."""

import signal
import threading

import pytest

from skl_ortgrad.training.interrupt import DeferredInterrupt

# DeferredInterrupt installs its handler only over Python's default one.
pytestmark = pytest.mark.usefixtures("default_sigint")


def test_a_held_interrupt_is_raised_when_the_block_ends():
    reached = []
    with pytest.raises(KeyboardInterrupt), DeferredInterrupt() as interrupt:
        signal.raise_signal(signal.SIGINT)
        reached.append(interrupt.pending)
    assert reached == [True]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_second_interrupt_raises_at_once():
    reached = []
    with pytest.raises(KeyboardInterrupt), DeferredInterrupt():
        signal.raise_signal(signal.SIGINT)
        reached.append(1)
        signal.raise_signal(signal.SIGINT)
        reached.append(2)
    assert reached == [1]


def test_no_interrupt_no_exception():
    with DeferredInterrupt() as interrupt:
        pass
    assert not interrupt.pending


def test_a_handler_of_the_user_stays_in_charge():
    calls = []
    previous = signal.signal(signal.SIGINT, lambda *args: calls.append(args[0]))
    try:
        with DeferredInterrupt() as interrupt:
            signal.raise_signal(signal.SIGINT)
        assert calls == [signal.SIGINT] and not interrupt.pending
    finally:
        signal.signal(signal.SIGINT, previous)


def test_outside_the_main_thread_nothing_is_installed():
    seen = []

    def run():
        with DeferredInterrupt():
            seen.append(signal.getsignal(signal.SIGINT))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert seen == [signal.default_int_handler]


def test_a_nested_block_shares_the_outer_interrupt_and_leaves_it_to_the_outer_end():
    reached = []
    with pytest.raises(KeyboardInterrupt), DeferredInterrupt() as outer:
        with DeferredInterrupt() as inner:
            signal.raise_signal(signal.SIGINT)
            reached.append((inner.pending, outer.pending))
        # The inner block ended without raising: the outer one delivers it.
        reached.append("after the inner block")
    assert reached == [(True, True), "after the inner block"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
