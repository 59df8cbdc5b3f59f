"""The run protocol, the same in Python as in Rust: the corpus that
``orch-agent/tests/protocol_corpus.rs`` writes (random templates, with rules on arguments
among them, and streams of messages, calls with results of every kind — a success
recorded with its values —, questions, answers — replayed and late ones too —,
approvals, rejections and resets, each with what the Rust reference decided and where the
session stood after it) is replayed through the installed package, which must decide
every step alike: the refusal's kind (for a broken rule, the rule and its words), whether
the result counts as run (``orch.result_kind``), whether an answer applies, the allowed
tools, the forced tool (``Session.forced_tool``), the step, the sequence index and the
verdict held.
"""

import json
import pathlib

import orch

CORPUS = pathlib.Path(__file__).resolve().parent / "fixtures" / "protocol.json"


def replay(case):
    machine = orch.compile(case["template"])
    session = machine.session()
    questions = []
    for i, step in enumerate(case["steps"]):
        op = step["op"]
        if op == "message":
            session.on_user_message(step["text"])
            decision = "ok"
        elif op == "call":
            refusal = session.admit(step["tool"], step["args"])
            if refusal is not None:
                decision = f"refused:{refusal.kind}"
                if refusal.rule is not None:
                    decision += f":{refusal.rule}: {refusal.message}"
            else:
                kind = orch.result_kind(step["result"])
                if kind == "ran":
                    # A success is recorded with its values, for rules that read them.
                    session.record(step["tool"], step.get("value"))
                    decision = "ran"
                else:
                    decision = f"not_run:{kind}"
        elif op == "ask":
            question = session.ask(step["tool"], step["args"])
            assert len(question) == 16
            questions.append((step["tool"], step["args"], question))
            decision = "asked"
        elif op == "answer":
            if not questions:
                decision = "no_question"
            else:
                tool, args, question = questions[0] if step["which"] == "first" else questions[-1]
                applied = session.answer(tool, args, question, step["approved"])
                decision = "applied" if applied else "stale"
        elif op == "approve":
            session.approve(step["tool"], step["args"])
            decision = "held"
        elif op == "reject":
            session.reject(step["tool"], step["args"])
            decision = "held"
        elif op == "reset":
            session.reset()
            decision = "ok"
        else:
            raise AssertionError(f"unknown op {op}")
        held = session.approval
        seen = {
            "decision": decision,
            "allowed": sorted(session.allowed()),
            "forced": session.forced_tool,
            "step": session.step,
            "index": session.sequence_index,
            "verdict": None if held is None else held[1],
        }
        assert seen == step["expect"], f"step {i} ({step}) of {case['template']}: {seen}"


def test_every_step_of_the_corpus_is_decided_as_rust_decides_it():
    corpus = json.loads(CORPUS.read_text())
    assert len(corpus["cases"]) >= 50
    for case in corpus["cases"]:
        replay(case)


def test_result_kinds():
    assert orch.result_kind('{"content": []}') == "ran"
    assert orch.result_kind('{"content": [], "isError": true}') == "error"
    assert orch.result_kind('{"resultType": "input_required"}') == "input_required"
    assert orch.result_kind('{"resultType": "task", "task": {}}') == "task"
    assert orch.result_kind("{}") == "malformed"
    assert orch.result_kind("not json") == "malformed"


def test_an_answer_applies_once_to_its_own_question():
    machine = orch.compile(
        '{"name": "shop", "tools": ["pay"], "orchestration": {"approve": ["pay"],'
        ' "steps": [{"name": "Shop", "isDefault": true}]}}'
    )
    session = machine.session()
    first = session.ask("pay", '{"order": 7}')
    assert session.answer("pay", '{"order": 7}', first, True)
    assert not session.answer("pay", '{"order": 7}', first, True), "twice"
    assert session.admit("pay", '{"order": 7}') is None
    # The same call asked about again: the first answer does not answer it.
    second = session.ask("pay", '{"order": 7}')
    assert second != first
    assert not session.answer("pay", '{"order": 7}', first, True)
    assert session.admit("pay", '{"order": 7}').kind == "needs_approval"
    assert not session.answer("pay", '{"order": 7}', "not a question", True)
    assert session.answer("pay", '{"order": 7}', second, True)
    assert session.admit("pay", '{"order": 7}') is None
