"""The collector pause: off inside, restored after (also on an error), never turned on by a nested pause."""

from __future__ import annotations

import gc

import pytest

from stormwatch.alerting.collector import paused


def test_the_collector_is_paused_inside_and_restored_after() -> None:
    assert gc.isenabled()
    with paused():
        assert not gc.isenabled()
        with paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner pause leaves the outer one in force
    assert gc.isenabled()
    with pytest.raises(ZeroDivisionError), paused():
        1 / 0  # noqa: B018
    assert gc.isenabled()


def test_a_collector_turned_off_elsewhere_stays_off() -> None:
    gc.disable()
    try:
        with paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
