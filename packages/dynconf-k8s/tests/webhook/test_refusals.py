"""Every refusal in the book, from ``cases/refusals.yaml``, through the pure admission function."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

CASES = yaml.safe_load((Path(__file__).parent / "cases" / "refusals.yaml").read_text())


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_refusal(case, pod_with, judge):
    pod = pod_with(case.get("set"), drop=tuple(case.get("drop", ())), **case.get("spec", {}))
    decision = judge(pod, env=case.get("env"), namespace=case.get("namespace", "default"))
    response = decision.response["response"]
    assert response["allowed"] is False, response
    status = response["status"]
    assert status["reason"] == case["reason"], status
    assert status["code"] == 400
    assert case["contains"] in status["message"], status["message"]
    if "absent" in case:
        assert case["absent"] not in status["message"]
    assert response["uid"] == "test-uid"
