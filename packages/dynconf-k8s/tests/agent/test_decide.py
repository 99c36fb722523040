"""The agent's decision table: every combination of what it knows and how it is configured.

:func:`decide` is pure, so the whole space is enumerated — latest, published, files,
on-delete, on-drift, startup policy, canary, starting (4,320 cases) — and each case is
checked against the contract's sentences, written here once as :func:`expected`. The
invariants after it say the same things from the other side (what can never happen).
"""

from __future__ import annotations

import inspect
import itertools
from pathlib import Path

import pytest

from dynconf_k8s.agent.decide import Action, Disk, DriftCheck, Latest, Policy, decide
from dynconf_k8s.vocabulary import ON_DELETE, ON_DRIFT, STARTUP_POLICIES

CASES = list(
    itertools.product(
        Latest, (False, True), Disk, ON_DELETE, ON_DRIFT, STARTUP_POLICIES, (False, True),
        (False, True),
    )
)  # fmt: skip


def expected(latest: Latest, published: bool, disk: Disk, on_delete: str, on_drift: str,
             startup: str, admits: bool, starting: bool) -> Action:  # fmt: skip
    """The contract, case by case (k8s-contract §2.3: startup, on-delete, on-drift, canary)."""
    if latest in (Latest.NONE, Latest.ABSENT) and not published:
        if not starting:
            return Action.NOTHING  # the store is still down, or the document never existed
        if startup == "require-fresh":
            return Action.FAIL
        if startup == "allow-cached":
            return Action.NOTHING if disk is Disk.CACHED else Action.FAIL
        return Action.EMPTY if disk is Disk.MISSING else Action.NOTHING
    drift_action = {"fail": Action.FAIL, "repair": Action.REPAIR, "warn": Action.NOTHING}
    if latest is Latest.ABSENT:
        if on_delete == "fail":
            return Action.FAIL
        if disk is Disk.DRIFTED:
            action = drift_action[on_drift]
            return Action.EMPTY if action is Action.REPAIR and on_delete == "remove" else action
        return Action.EMPTY if on_delete == "remove" and disk is not Disk.EMPTY else Action.NOTHING
    if latest is Latest.NEW:
        return Action.HOLD if published and not admits else Action.PUBLISH
    return drift_action[on_drift] if disk is Disk.DRIFTED else Action.NOTHING


@pytest.mark.parametrize(
    ("latest", "published", "disk", "on_delete", "on_drift", "startup", "admits", "starting"),
    CASES,
)
def test_every_case_follows_the_contract(
    latest: Latest, published: bool, disk: Disk, on_delete: str, on_drift: str, startup: str,
    admits: bool, starting: bool,
) -> None:  # fmt: skip
    decision = decide(
        latest, published=published, disk=disk, policy=Policy(startup, on_delete, on_drift),
        canary_admits=admits, starting=starting,
    )  # fmt: skip

    assert decision.action is expected(
        latest, published, disk, on_delete, on_drift, startup, admits, starting
    )
    assert decision.reason


def _all() -> list[tuple[tuple[object, ...], Action]]:
    return [
        (case, decide(case[0], published=case[1], disk=case[2],
                      policy=Policy(case[5], case[3], case[4]), canary_admits=case[6],
                      starting=case[7]).action)
        for case in CASES
    ]  # fmt: skip


def test_only_a_new_document_is_published_or_held() -> None:
    for case, action in _all():
        if action in (Action.PUBLISH, Action.HOLD):
            assert case[0] is Latest.NEW, case


def test_the_first_publish_of_a_run_is_never_held_by_the_canary() -> None:
    for case, action in _all():
        if not case[1]:
            assert action is not Action.HOLD, case


def test_fail_comes_only_from_a_policy_that_says_fail() -> None:
    for case, action in _all():
        if action is Action.FAIL:
            latest, published, _, on_delete, on_drift, startup, _, starting = case
            assert (
                (starting and not published and startup in ("require-fresh", "allow-cached"))
                or (latest is Latest.ABSENT and on_delete == "fail")
                or on_drift == "fail"
            ), case


def test_nothing_published_by_this_run_is_never_emptied_after_start() -> None:
    for case, action in _all():
        if action is Action.EMPTY and not case[1]:
            assert case[7] and case[5] == "best-effort", case


def test_require_ack_is_not_an_input_of_what_is_written() -> None:
    assert "require_ack" not in inspect.signature(decide).parameters


def test_the_drift_check_reads_back_only_a_file_something_touched(tmp_path: Path) -> None:
    out = tmp_path / "app.json"
    out.write_bytes(b"ours")
    on_disk = {out: b"ours"}
    check = DriftCheck()
    assert check.drifted(check.unsure(on_disk)) == []  # read back once: intact
    assert check.unsure(on_disk) == {}  # untouched since: nothing to read
    out.write_bytes(b"ours")  # the same bytes written again: read back, still intact
    assert check.unsure(on_disk) == on_disk
    assert check.drifted(check.unsure(on_disk)) == []
    scratch = tmp_path / "other"
    scratch.write_bytes(b"theirs")
    scratch.replace(out)  # renamed over it
    assert check.drifted(check.unsure(on_disk)) == [out]
    out.unlink()
    assert check.drifted(check.unsure(on_disk)) == [out]
