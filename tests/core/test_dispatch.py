import os
import pickle
import threading
import uuid

import pytest

from backwave_django.core.dispatch import ClaimBatch, StrictDispatch, WeightedDispatch, parse_weights
from backwave_django.core.ids import job_id_for_key, uuid7


def test_weighted_six_three_one_follows_the_smooth_sequence():
    dispatch = WeightedDispatch([("a", 6), ("b", 3), ("c", 1)])
    assert dispatch.sequence(10) == list("abaabacaba")


def test_weighted_five_one_one_follows_the_smooth_sequence():
    assert WeightedDispatch([("a", 5), ("b", 1), ("c", 1)]).sequence(7) == list("aabacaa")


def test_weighted_plan_allocates_by_weight_with_the_others_as_fallback():
    dispatch = WeightedDispatch([("a", 6), ("b", 3), ("c", 1)])
    assert dispatch.plan(10) == [
        ClaimBatch(("a", "b", "c"), 6),
        ClaimBatch(("b", "a", "c"), 3),
        ClaimBatch(("c", "a", "b"), 1),
    ]


def test_weighted_credit_advances_only_for_issued_batches():
    dispatch = WeightedDispatch([("a", 1), ("b", 1)])
    first = dispatch.plan(1)
    assert first == dispatch.plan(1)  # planning alone changes nothing
    dispatch.issued(first[0])
    assert dispatch.plan(1)[0].queues[0] == "b"


@pytest.mark.parametrize("weights", [[], [("a", 0)], [("a", 1), ("b", -2)]])
def test_weighted_refuses_bad_weights(weights):
    with pytest.raises(ValueError, match=r"at least one queue, all weights >= 1\."):
        WeightedDispatch(weights)


def test_strict_plans_one_batch_over_all_queues_in_order():
    assert StrictDispatch(["a", "b", "a"]).plan(5) == [ClaimBatch(("a", "b"), 5)]
    assert StrictDispatch(["a"]).plan(0) == []


def test_parse_weights():
    assert parse_weights("a=6, b=3,c=1") == [("a", 6), ("b", 3), ("c", 1)]
    with pytest.raises(ValueError, match="expected queue=weight"):
        parse_weights("a=6,b")


def test_uuid7_is_version_7_and_time_ordered():
    ids = [uuid7() for _ in range(50)]
    assert {i.version for i in ids} == {7}
    assert [i.int >> 80 for i in ids] == sorted(i.int >> 80 for i in ids)


def test_a_uuid7_is_a_uuid_like_any_other():
    """Built without the constructor's checks, it still equals, hashes, prints, pickles and
    compares as the same UUID built the usual way."""
    made = uuid7()
    usual = uuid.UUID(int=made.int)
    assert made == usual
    assert hash(made) == hash(usual)
    assert str(made) == str(usual)
    assert made.is_safe == usual.is_safe
    assert made.variant == uuid.RFC_4122
    assert pickle.loads(pickle.dumps(made)) == usual
    assert uuid.UUID(str(made)) == made


def test_uuid7s_made_by_many_threads_at_once_are_all_different():
    """The random bits come from a pool (core/ids.py); no two threads may take the same ones."""
    made: list[list[uuid.UUID]] = [[] for _ in range(8)]
    start = threading.Barrier(len(made))

    def make(into: list[uuid.UUID]) -> None:
        start.wait()
        into.extend(uuid7() for _ in range(20_000))

    threads = [threading.Thread(target=make, args=(ids,)) for ids in made]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({i for ids in made for i in ids}) == 8 * 20_000


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork() here")
def test_a_forked_child_does_not_reuse_its_parents_random_bits():
    uuid7()  # the parent has a pool with values left
    reading, writing = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: send the random bits of its next three ids, then leave at once
        os.write(writing, b"".join(uuid7().bytes[6:] for _ in range(3)))
        os._exit(0)
    os.close(writing)
    os.waitpid(pid, 0)
    from_child = os.read(reading, 64)
    os.close(reading)
    from_parent = b"".join(uuid7().bytes[6:] for _ in range(3))
    assert len(from_child) == 30
    assert from_child != from_parent


def test_job_keys_give_stable_ids_per_wire_name():
    assert job_id_for_key("w", "order-42") == job_id_for_key("w", "order-42")
    assert job_id_for_key("w", "order-42") != job_id_for_key("other", "order-42")
