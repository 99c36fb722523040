"""The pure parts of restarts: what a pod template consumes, the fingerprint, the settings."""

from __future__ import annotations

import pytest

from dynconf_k8s.operator.restarts import (
    MIN_INTERVAL_ENV,
    RESTARTS_ENV,
    SETTLE_ENV,
    RestartSettings,
    SettingsError,
    consumed_objects,
    fingerprint,
    restart_settings,
)
from dynconf_k8s.operator.targets import TargetRef


def test_every_way_a_pod_reads_a_configmap_or_secret_is_seen() -> None:
    spec = {
        "volumes": [
            {"name": "a", "configMap": {"name": "cm-volume"}},
            {"name": "b", "secret": {"secretName": "s-volume"}},
            {
                "name": "c",
                "projected": {
                    "sources": [
                        {"configMap": {"name": "cm-projected"}},
                        {"secret": {"name": "s-projected"}},
                        {"serviceAccountToken": {"path": "token"}},
                    ]
                },
            },
            {"name": "d", "emptyDir": {}},
        ],
        "initContainers": [{"name": "i", "envFrom": [{"secretRef": {"name": "s-envfrom"}}]}],
        "containers": [
            {
                "name": "app",
                "envFrom": [{"configMapRef": {"name": "cm-envfrom"}}],
                "env": [
                    {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cm-key", "key": "a"}}},
                    {"name": "B", "valueFrom": {"secretKeyRef": {"name": "s-key", "key": "b"}}},
                    {"name": "C", "value": "plain"},
                    {"name": "D", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                ],
            }
        ],
    }

    assert consumed_objects(spec) == {
        TargetRef("ConfigMap", "cm-volume"),
        TargetRef("Secret", "s-volume"),
        TargetRef("ConfigMap", "cm-projected"),
        TargetRef("Secret", "s-projected"),
        TargetRef("Secret", "s-envfrom"),
        TargetRef("ConfigMap", "cm-envfrom"),
        TargetRef("ConfigMap", "cm-key"),
        TargetRef("Secret", "s-key"),
    }


def test_a_malformed_template_consumes_nothing_rather_than_failing() -> None:
    assert consumed_objects({"volumes": "x", "containers": [None, {"env": [3]}]}) == frozenset()


def test_a_configmap_and_a_secret_of_one_name_are_different_targets() -> None:
    data = {"k": "v"}
    as_configmap = fingerprint({TargetRef("ConfigMap", "x"): data})
    as_secret = fingerprint({TargetRef("Secret", "x"): data})
    assert as_configmap != as_secret
    assert len(as_configmap) == 32
    assert set(as_configmap) <= set("0123456789abcdef")


def test_the_fingerprint_moves_with_any_value_and_ignores_order() -> None:
    one = {TargetRef("ConfigMap", "a"): {"x": "1", "y": "2"}, TargetRef("Secret", "b"): {}}
    reordered = {TargetRef("Secret", "b"): {}, TargetRef("ConfigMap", "a"): {"y": "2", "x": "1"}}
    changed = {TargetRef("ConfigMap", "a"): {"x": "1", "y": "3"}, TargetRef("Secret", "b"): {}}
    assert fingerprint(one) == fingerprint(reordered)
    assert fingerprint(one) != fingerprint(changed)


def test_restarts_are_off_unless_switched_on() -> None:
    assert restart_settings({}) is None
    assert restart_settings({RESTARTS_ENV: "false", MIN_INTERVAL_ENV: "nonsense"}) is None


def test_restart_settings_take_seconds_or_durations_and_default_the_rest() -> None:
    assert restart_settings({RESTARTS_ENV: "true"}) == RestartSettings(60.0, 5.0)
    assert restart_settings(
        {RESTARTS_ENV: "true", MIN_INTERVAL_ENV: "5m", SETTLE_ENV: "2"}
    ) == RestartSettings(300.0, 2.0)


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({RESTARTS_ENV: "yes"}, RESTARTS_ENV),
        ({RESTARTS_ENV: "true", MIN_INTERVAL_ENV: "soon"}, MIN_INTERVAL_ENV),
        ({RESTARTS_ENV: "true", SETTLE_ENV: "0"}, SETTLE_ENV),
    ],
)
def test_a_bad_restart_setting_is_refused_naming_the_variable(
    environ: dict[str, str], named: str
) -> None:
    with pytest.raises(SettingsError) as refused:
        restart_settings(environ)
    assert str(refused.value).startswith(named + " ")
