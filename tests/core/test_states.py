from backwave_django import JobState
from backwave_django.core.states import LEGAL_EDGES, TERMINAL_STATES, DependencyMode, is_legal_edge


def test_job_state_values_are_the_persisted_ordinals():
    assert [(s.value, s.name, s.label) for s in JobState] == [
        (0, "SCHEDULED", "Scheduled"),
        (1, "AWAITING_PARENT", "Awaiting Parent"),
        (2, "LEASED", "Leased"),
        (3, "SUCCEEDED", "Succeeded"),
        (4, "CANCELLED", "Cancelled"),
        (5, "DEAD_LETTERED", "Dead-Lettered"),
        (6, "QUARANTINED", "Quarantined"),
    ]


def test_terminal_states_are_three_to_six():
    assert {s for s in JobState if s.is_terminal} == TERMINAL_STATES
    assert sorted(s.value for s in TERMINAL_STATES) == [3, 4, 5, 6]


def test_pascal_names_are_the_seed_names():
    assert [s.pascal for s in JobState] == [
        "Scheduled",
        "AwaitingParent",
        "Leased",
        "Succeeded",
        "Cancelled",
        "DeadLettered",
        "Quarantined",
    ]


def test_dependency_mode_defaults_to_on_success():
    assert DependencyMode.ON_SUCCESS.value == 0
    assert DependencyMode.ON_ANY_TERMINAL.value == 1


def test_legal_edge_table_has_the_fourteen_documented_rows():
    assert len(LEGAL_EDGES) == 14
    assert is_legal_edge(None, JobState.CANCELLED)
    assert is_legal_edge(JobState.QUARANTINED, JobState.SCHEDULED)
    assert not is_legal_edge(JobState.SUCCEEDED, JobState.SCHEDULED)
    assert not is_legal_edge(None, JobState.LEASED)
    assert not is_legal_edge(JobState.LEASED, JobState.LEASED)
