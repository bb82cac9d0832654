import pytest

from backwave_django.core.states import JobState

from ..conftest import enqueue, history, lease, report, row

pytestmark = pytest.mark.django_db


def test_enqueue_claim_succeed_round_trip():
    job_id = enqueue(tags=["vip", ("tenant", "acme")])
    [claimed] = lease()
    assert claimed.job_id == job_id
    assert claimed.attempt == 1
    assert set(claimed.tags) == {"vip", ("tenant", "acme")}
    report(job_id, output={"sent": True})
    record = row(job_id)
    assert record.state == JobState.SUCCEEDED
    assert record.output == {"sent": True}
    assert [h[1] for h in history(job_id)] == ["SCHEDULED", "LEASED", "SUCCEEDED"]
