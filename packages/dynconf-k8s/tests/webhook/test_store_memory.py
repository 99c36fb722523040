"""A firestore or s3 agent gets the memory limit its client needs unless someone chose one.

The floors come from ``bench/agent_memory.py`` (measured peak plus 25 %); the chart sets the
fleet default to 64Mi, so a floor must lift a fleet value, yet yield to the pod, to the
store's own installation default and to a pinned fleet value.
"""

from __future__ import annotations

import pytest

FIRESTORE = {"source": "firestore", "endpoint": "demo-project", "key": "cfg/app"}
S3 = {"source": "s3", "endpoint": "config-bucket", "key": "app.json"}


def memory_limit(judge, added, pod, env=None) -> str:
    agent = added(judge(pod, env or {}), "dynamic-config-agent")
    return str(agent["resources"]["limits"]["memory"])


@pytest.mark.parametrize(("store", "floor"), [(FIRESTORE, "128Mi"), (S3, "96Mi")])
@pytest.mark.parametrize("fleet", [None, "64Mi"], ids=["built-in", "chart-fleet-64Mi"])
def test_store_floor_lifts_the_default_limit(store, floor, fleet, pod_with, judge, added):
    env = {"DYNAMIC_CONFIG_AGENT_MEMORY_LIMIT": fleet} if fleet else {}
    assert memory_limit(judge, added, pod_with(store), env) == floor


def test_other_stores_keep_the_fleet_limit(pod_with, judge, added):
    assert memory_limit(judge, added, pod_with()) == "64Mi"  # consul


def test_annotation_wins_over_the_floor(pod_with, judge, added):
    pod = pod_with({**FIRESTORE, "agent-memory-limit": "48Mi"})
    assert memory_limit(judge, added, pod) == "48Mi"


def test_store_installation_default_wins_over_the_floor(pod_with, judge, added):
    env = {"DYNAMIC_CONFIG_AGENT_STORE_DEFAULTS": "firestore: agent-memory-limit=80Mi"}
    assert memory_limit(judge, added, pod_with(FIRESTORE), env) == "80Mi"


def test_pinned_fleet_limit_wins_over_the_floor(pod_with, judge, added):
    env = {"DYNAMIC_CONFIG_AGENT_MEMORY_LIMIT": "64Mi!"}
    assert memory_limit(judge, added, pod_with(FIRESTORE), env) == "64Mi"


def test_fleet_limit_above_the_floor_is_kept(pod_with, judge, added):
    env = {"DYNAMIC_CONFIG_AGENT_MEMORY_LIMIT": "256Mi"}
    assert memory_limit(judge, added, pod_with(FIRESTORE), env) == "256Mi"
