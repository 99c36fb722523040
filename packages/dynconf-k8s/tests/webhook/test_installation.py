"""Installation settings: grammar, validation at start, and the two spellings agreeing."""

from __future__ import annotations

import pytest

from dynconf_k8s.contract import (
    InstallationError,
    merge_environment,
    parse_installation,
    render_document,
)
from dynconf_k8s.webhook.admission import dumps_pretty
from dynconf_k8s.webhook.settings import load_installation

DOCUMENT = """
watchSeconds: "30"
fileMode: "0640"
overridable: true
storeDefaults:
  vault:
    overridable: false
    endpoint: https://vault:8200
  s3:
    file-mode: "0640?"
sourceAllow:
  payments: [vault, s3]
  "*": [consul]
agentEnvAllow:
  default: [RUST_LOG]
"""


def test_document_renders_to_variables_sorted():
    env = render_document(DOCUMENT)
    assert env["DYNAMIC_CONFIG_AGENT_STORE_DEFAULTS"] == (
        "s3: file-mode=0640?; vault: endpoint=https://vault:8200, overridable=false"
    )
    assert env["DYNAMIC_CONFIG_WEBHOOK_SOURCE_ALLOW"] == "*: consul; payments: vault, s3"


def test_document_and_variables_give_identical_responses(pod_with, judge):
    from_document = parse_installation(merge_environment({}, DOCUMENT, origin="doc"))
    from_variables = parse_installation(
        {
            "DYNAMIC_CONFIG_AGENT_WATCH_SECONDS": "30",
            "DYNAMIC_CONFIG_AGENT_FILE_MODE": "0640",
            "DYNAMIC_CONFIG_AGENT_DEFAULTS_OVERRIDABLE": "true",
            "DYNAMIC_CONFIG_AGENT_STORE_DEFAULTS": "vault: overridable=false, endpoint=https://vault:8200; s3: file-mode=0640?",
            "DYNAMIC_CONFIG_WEBHOOK_SOURCE_ALLOW": "payments: vault, s3; *: consul",
            "DYNAMIC_CONFIG_WEBHOOK_AGENT_ENV_ALLOW": "default: RUST_LOG",
        }
    )
    pods = [
        pod_with(),
        pod_with({"agent-env": "RUST_LOG=debug"}),
        pod_with({"source": "vault", "endpoint": "https://other:8200", "key": "secret/x"}),
        pod_with({"source": "s3", "endpoint": "bucket", "key": "a.json", "file-mode": "0600"}),
    ]
    for pod in pods:
        for namespace in ("default", "payments"):
            a = judge(pod, namespace=namespace, installation=from_document).response
            b = judge(pod, namespace=namespace, installation=from_variables).response
            assert dumps_pretty(a) == dumps_pretty(b)


def test_variable_wins_over_document():
    env = merge_environment({"DYNAMIC_CONFIG_AGENT_WATCH_SECONDS": "45"}, DOCUMENT, origin="doc")
    assert parse_installation(env).fleet["watch-seconds"].text == "45"


@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        (
            "watchSecond: 30\n",
            "watchSecond is not an installation setting; the ones there are: agentEnv",
        ),
        ("endpoint: http://consul:8500\n", "there is no fleet endpoint"),
        (
            "storeDefaults:\n  vault: [a]\n",
            "storeDefaults.vault: a map of setting to value, or that grammar as one string; this is a list",
        ),
        ("sourceAllow: [vault]\n", "sourceAllow: a map of namespace to a list of names"),
    ],
)
def test_document_problems_are_named(document, fragment):
    with pytest.raises(InstallationError) as caught:
        render_document(document)
    assert any(fragment in p for p in caught.value.problems), caught.value.problems


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"DYNAMIC_CONFIG_AGENT_FILE_MODE": "888"}, "octal"),
        ({"DYNAMIC_CONFIG_AGENT_FILE_MODE": "7777"}, "at most 0777"),
        ({"DYNAMIC_CONFIG_AGENT_FILE_MODE": "044"}, "owner"),
        ({"DYNAMIC_CONFIG_AGENT_PATH": "config/x.toml"}, "absolute"),
        ({"DYNAMIC_CONFIG_AGENT_SOURCE": "zk"}, "consul, vault"),
        (
            {"DYNAMIC_CONFIG_AGENT_FILEMODE": "0640"},
            "DYNAMIC_CONFIG_AGENT_FILEMODE is not an installation setting; the ones there are:",
        ),
        ({"DYNAMIC_CONFIG_AGENT_STORE_DEFAULTS": "endpoint=http://x"}, "has no `store:` head"),
        ({"DYNAMIC_CONFIG_AGENT_STORE_DEFAULTS": "zk: endpoint=x"}, "is not a store"),
        ({"DYNAMIC_CONFIG_AGENT_STORE_DEFAULTS": "vault: token-secret=vt"}, "<secret-name>/<key>"),
        (
            {"DYNAMIC_CONFIG_AGENT_STORE_DEFAULTS": "vault: colour=blue"},
            "colour is not a defaultable knob; the knobs are",
        ),
        (
            {"DYNAMIC_CONFIG_AGENT_STORE_DEFAULTS": "vault: auth=; consul: key=a"},
            "vault's auth is empty",
        ),
        ({"DYNAMIC_CONFIG_AGENT_STORE_DEFAULTS": "vault: auth=x; vault: key=a"}, "appears twice"),
        ({"DYNAMIC_CONFIG_WEBHOOK_SOURCE_DENY": "sandbox: got"}, "'got' is not a store"),
        ({"DYNAMIC_CONFIG_WEBHOOK_SOURCE_ALLOW": "payments:"}, "names nothing"),
        ({"DYNAMIC_CONFIG_WEBHOOK_AGENT_ENV_ALLOW": "Team A: X"}, "not a namespace name"),
        ({"DYNAMIC_CONFIG_WEBHOOK_AGENT_ENV_ALLOW": "*: https_proxy"}, "UPPER_SNAKE"),
        ({"DYNAMIC_CONFIG_WEBHOOK_ALLOW_EVENTS": "yes"}, '"true" or "false"'),
    ],
)
def test_installation_typos_stop_start(env, fragment):
    with pytest.raises(InstallationError) as caught:
        parse_installation(env)
    assert any(fragment in p for p in caught.value.problems), caught.value.problems


def test_every_problem_is_listed_at_once():
    with pytest.raises(InstallationError) as caught:
        parse_installation(
            {"DYNAMIC_CONFIG_AGENT_FILE_MODE": "888", "DYNAMIC_CONFIG_AGENT_MODE": "x"}
        )
    assert len(caught.value.problems) == 2


def test_markers_and_overridable_rungs():
    inst = parse_installation(
        {
            "DYNAMIC_CONFIG_AGENT_DEFAULTS_OVERRIDABLE": "false",
            "DYNAMIC_CONFIG_AGENT_FILE_MODE": "0640",
            "DYNAMIC_CONFIG_AGENT_WATCH_SECONDS": "30 ?",
            "DYNAMIC_CONFIG_AGENT_STORE_DEFAULTS": "consul: overridable=true, endpoint=http://c:8500, key=a.json!",
        }
    )
    assert inst.fleet["file-mode"].pinned and not inst.fleet["watch-seconds"].pinned
    assert inst.fleet["watch-seconds"].text == "30"
    assert not inst.per_store["consul"]["endpoint"].pinned
    assert inst.per_store["consul"]["key"].pinned


def test_absent_document_is_empty(tmp_path):
    inst = load_installation({"DYNAMIC_CONFIG_WEBHOOK_DEFAULTS_FILE": str(tmp_path / "none.yaml")})
    assert inst.fleet == {} and inst.per_store == {}


def test_comment_only_document_is_empty(tmp_path):
    path = tmp_path / "installation.yaml"
    path.write_text("# nothing yet\n")
    assert load_installation({"DYNAMIC_CONFIG_WEBHOOK_DEFAULTS_FILE": str(path)}).fleet == {}


SERVICE_LINKS = {
    "DYNAMIC_CONFIG_WEBHOOK_SERVICE_HOST": "10.0.0.7",
    "DYNAMIC_CONFIG_WEBHOOK_SERVICE_PORT": "443",
    "DYNAMIC_CONFIG_WEBHOOK_SERVICE_PORT_HTTPS": "443",
    "DYNAMIC_CONFIG_WEBHOOK_SERVICE_PORT_METRICS": "9091",
    "DYNAMIC_CONFIG_WEBHOOK_PORT": "tcp://10.0.0.7:443",
    "DYNAMIC_CONFIG_WEBHOOK_PORT_443_TCP": "tcp://10.0.0.7:443",
    "DYNAMIC_CONFIG_WEBHOOK_PORT_443_TCP_PROTO": "tcp",
    "DYNAMIC_CONFIG_WEBHOOK_PORT_443_TCP_PORT": "443",
    "DYNAMIC_CONFIG_WEBHOOK_PORT_443_TCP_ADDR": "10.0.0.7",
}
"""What the kubelet put in the chart's webhook container for its own Service (found on the
node: the webhook refused to start on them)."""


def test_service_link_variables_of_a_dynamic_config_service_are_not_settings():
    parse_installation(SERVICE_LINKS)


def test_a_misspelt_setting_shaped_like_a_port_is_still_refused():
    with pytest.raises(InstallationError) as caught:
        parse_installation({"DYNAMIC_CONFIG_AGENT_METRIC_PORT": "9110"})

    assert any("DYNAMIC_CONFIG_AGENT_METRIC_PORT is not an installation setting" in p
               for p in caught.value.problems)  # fmt: skip
