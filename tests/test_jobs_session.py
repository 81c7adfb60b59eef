"""The session: each object is made once however many jobs name it (at the same time too), the most recently used
few of a kind are kept, an error is not kept; a Job runs its function with its arguments and pickles by name."""

from __future__ import annotations

import pickle
import threading
import time

import pytest

from probescope.jobs.protocol import Job, TaskContext
from probescope.jobs.session import KEPT, Session


def test_an_object_is_made_once_even_when_asked_for_at_once():
    session, made = Session(), []

    def make():
        time.sleep(0.05)
        made.append(1)
        return object()

    got = []
    threads = [threading.Thread(target=lambda: got.append(session.get("dataset", "demo", make))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 1 and len({id(g) for g in got}) == 1


def test_the_most_recently_used_are_kept_and_errors_are_not():
    session = Session()
    n = KEPT["model"]
    for k in range(n + 1):
        session.get("model", k, lambda k=k: f"model {k}")
    assert session.held("model") == list(range(1, n + 1))  # the first one made went
    assert session.get("model", 1, lambda: "made again") == "model 1"  # still held: used, so now the newest
    assert session.held("model")[-1] == 1

    def fail():
        raise ValueError("no")

    with pytest.raises(ValueError):
        session.get("dataset", "x", fail)
    assert session.get("dataset", "x", lambda: "made") == "made"
    session.drop("dataset", "x")
    assert session.held("dataset") == []


def _double(ctx: TaskContext, value: int) -> int:
    return 2 * ctx.session.get("n", value, lambda: value)


def test_an_object_held_is_known_by_its_name_until_it_is_let_go():
    """`hold` replaces what a key held; `name_of` names what is held, and forgets it when it is dropped, evicted or
    replaced (the kernel's messages send a held object by that name)."""
    session = Session()
    first, second = object(), object()
    assert session.hold("judgments", "a", first) is first and session.name_of(first) == ("judgments", "a")
    session.hold("judgments", "a", second)
    assert session.get("judgments", "a", object) is second
    assert session.name_of(first) is None and session.name_of(second) == ("judgments", "a")
    others = [session.hold("judgments", k, object()) for k in range(KEPT["judgments"])]  # "a" is evicted
    assert session.name_of(second) is None and session.name_of(others[-1]) == ("judgments", KEPT["judgments"] - 1)
    session.drop("judgments")
    assert [session.name_of(o) for o in others] == [None] * len(others)
    assert session.name_of(object()) is None


def test_a_job_runs_its_function_and_travels_by_name():
    job = pickle.loads(pickle.dumps(Job(_double, {"value": 21}, compute=False)))
    assert job(TaskContext()) == 42
    assert job.name.endswith("test_jobs_session._double")
