"""The run host, the same in Python as in Rust, under faults: the corpus that
``orch-agent/tests/run_host_corpus.rs`` writes — random templates and streams of calls on
two runs of each, begun (asking, or refusing without asking), answered, finished with
results of every kind, with the faults a framework or a network inflicts: the same call
delivered again after it ran, was refused or while it runs; an approval replayed,
answered twice, after its expiry, for the same id with other arguments, on the other run;
a result delivered twice or for a call never begun; the host restored from its snapshot
between any two phases; time passing; user messages — is replayed through the installed
package, which must decide every step alike and leave each run where Rust left it (the
tools allowed, the history, the step).
"""

import json
import pathlib

import orch

CORPUS = pathlib.Path(__file__).resolve().parent / "fixtures" / "run-host.json"


def replay(case, ttl):
    machine = orch.compile(case["template"])
    runs = [machine.session(), machine.session()]
    for run in runs:
        run.set_question_ttl(ttl)
    for i, step in enumerate(case["steps"]):
        op = step["op"]
        at = step.get("run", 0)
        session = runs[at]
        if op == "begin":
            begun = session.begin(
                step["id"], step["tool"], step["args"], ask=step["ask"], now_ms=step["now"]
            )
            decision = f"{begun.action}:{begun.refusal.kind if begun.refusal else ''}"
        elif op == "answer":
            answered = session.answer_call(
                step["id"], step["tool"], step["args"], step["approved"], now_ms=step["now"]
            )
            kind = answered.refusal.kind if answered.refusal else ""
            decision = f"{answered.outcome}:{kind}"
        elif op == "finish":
            decision = session.finish(step["id"], step["tool"], True, step["result"])
        elif op == "restore":
            # A process killed and started again: the run comes back from its snapshot.
            session = machine.restore(session.snapshot())
            session.set_question_ttl(ttl)
            runs[at] = session
            decision = "ok"
        elif op == "message":
            session.on_user_message(step["text"])
            decision = "ok"
        elif op == "wait":
            decision = "ok"
        else:
            raise AssertionError(f"unknown op {op}")
        seen = {
            "decision": decision,
            "allowed": sorted(session.allowed()),
            "history": session.history,
            "step": session.step,
        }
        after = step["after"]
        want = {
            "decision": step["decision"],
            "allowed": sorted(after["allowed"]),
            "history": after["history"],
            "step": after["step"],
        }
        assert seen == want, f"step {i} ({json.dumps(step)}) of {case['template']}"


def test_every_step_of_the_run_host_corpus_is_decided_as_rust_decides_it():
    corpus = json.loads(CORPUS.read_text())
    assert len(corpus["cases"]) >= 40
    for case in corpus["cases"]:
        replay(case, corpus["questionTtlSeconds"])
