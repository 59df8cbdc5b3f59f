"""Observe mode in the Python package: a machine loaded with ``mode="observe"`` judges
every call as enforce mode does and refuses and asks nothing — ``check`` and
``check_call`` answer ``None``, ``begin`` answers ``run``, every tool is offered, none is
forced — and its runs stand where an enforcing run stands after the same calls."""

import json
import pathlib

import pytest

import orch

REFUND = pathlib.Path(__file__).resolve().parents[2] / "examples" / "agents" / "refund-desk" / "template.json"


def test_observe_runs_what_enforce_refuses_and_stands_where_enforce_would():
    observing = orch.load(REFUND, mode="observe")
    enforcing = orch.load(REFUND)
    assert observing.mode == "observe" and enforcing.mode == "enforce"
    assert observing.fingerprint == enforcing.fingerprint
    watched, strict = observing.session(), enforcing.session()
    assert watched.mode == "observe"
    # Help allows lookup_order and send_email; issue_refund would be refused.
    assert strict.check("issue_refund") is not None
    assert watched.check("issue_refund") is None
    assert watched.check_call("issue_refund", '{"order": 1}') is None
    assert sorted(watched.allowed()) == sorted(observing.tools)
    begun = watched.begin("c1", "issue_refund", '{"order": 1}')
    assert begun.action == "run", begun
    # Recorded though the step does not allow it: it ran.
    assert watched.finish("c1", "issue_refund", True) == "not_allowed"
    strict.record("issue_refund")
    assert watched.history == strict.history
    assert watched.step == strict.step
    # In step Refund the sequence forces lookup_order when enforcing; observing forces
    # nothing, and a gated call is not asked about.
    for session in (watched, strict):
        session.on_user_message("please refund my order")
    assert strict.forced_tool == "lookup_order"
    assert watched.forced_tool is None
    assert watched.begin("c-look", "lookup_order", '{"order": 2}').action == "run"
    watched.finish("c-look", "lookup_order", True)
    strict.record("lookup_order")
    # The refund is gated: enforcing asks a human, observing runs it.
    assert strict.begin("c-x", "issue_refund", '{"order": 2}').action == "ask"
    assert watched.begin("c-pay", "issue_refund", '{"order": 2}').action == "run"
    watched.finish("c-pay", "issue_refund", True)
    strict.record("issue_refund")
    assert (watched.step, watched.sequence_index, watched.history) == (
        strict.step,
        strict.sequence_index,
        strict.history,
    )
    # A session restored from its snapshot keeps its machine's mode.
    assert observing.restore(watched.snapshot()).mode == "observe"


def test_an_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="expected `enforce` or `observe`"):
        orch.compile(json.dumps({"tools": ["a"]}), mode="watch")
