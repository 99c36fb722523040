"""Admission decides a store's refusal by its field, never by its words.

A store answers :class:`dynconf.errors.Refusal` data; the webhook leaves to the agent only the
refusals about the ``endpoint`` when the address is in a Secret (admission cannot read it) and
raises every other one, spelled with the annotation that sets the input. The first half
rewords a real store's refusals (consul's, with one rule added) and shows the decision does
not move; the second drives every store through a matrix of bad specs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from dynconf.errors import Refusal
from dynconf.plugins import default_registry, discover, use_registry
from dynconf.stores import StoreSpec, TlsSettings
from dynconf_k8s.contract.registry import annotation, input_key
from dynconf_store_consul.plugin import ConsulStoreType

IN_A_SECRET: dict[str, Any] = {"extra": {"endpoint-secret": "consul/url"}, "drop": ("endpoint",)}


class _Added(ConsulStoreType):
    """Consul with one more rule, whose field and words the test chooses."""

    def __init__(self, added: Refusal) -> None:
        self.added = added

    def store_refusals(self, spec: StoreSpec) -> list[Refusal]:
        return [*super().store_refusals(spec), self.added]


@pytest.fixture
def consul_adds() -> Iterator[Callable[[Refusal], None]]:
    registry = discover()

    def add(refusal: Refusal) -> None:
        registry.stores["consul"] = _Added(refusal)
        use_registry(registry)

    yield add
    use_registry(None)


def _message(judge: Any, pod: dict[str, Any]) -> str | None:
    response = judge(pod).response["response"]
    return None if response["allowed"] else str(response["status"]["message"])


def test_a_refusal_about_another_input_is_raised_whatever_its_words_say(
    consul_adds: Callable[[Refusal], None], pod_with: Any, judge: Any
) -> None:
    consul_adds(Refusal("auth_role", "the url host address of {field} is wrong", "fix it"))

    message = _message(judge, pod_with(IN_A_SECRET["extra"], drop=IN_A_SECRET["drop"]))

    assert message == "the url host address of dynamic-config.rs/auth-role is wrong; fix it"


def test_a_refusal_without_a_field_is_never_dropped(
    consul_adds: Callable[[Refusal], None], pod_with: Any, judge: Any
) -> None:
    consul_adds(Refusal(None, "the endpoint url scheme host is wrong for the whole spec"))

    message = _message(judge, pod_with(IN_A_SECRET["extra"], drop=IN_A_SECRET["drop"]))

    assert message == "the endpoint url scheme host is wrong for the whole spec"


class _Broken(ConsulStoreType):
    """A store plugin whose rules raise: admission must neither admit unjudged nor crash."""

    def store_refusals(self, spec: StoreSpec) -> list[Refusal]:
        raise KeyError("token")


def test_a_store_whose_rules_raise_is_refused_naming_the_store_not_admitted(
    pod_with: Any, judge: Any
) -> None:
    registry = discover()
    registry.stores["consul"] = _Broken()
    use_registry(registry)
    try:
        message = _message(judge, pod_with({}))
    finally:
        use_registry(None)

    assert message is not None
    assert message.startswith("the consul store could not judge this render (KeyError)")
    assert "'token'" not in message


@pytest.mark.parametrize("words", ["the endpoint is wrong", "nothing about an address"])
def test_an_endpoint_refusal_is_dropped_exactly_when_the_endpoint_is_in_a_secret(
    consul_adds: Callable[[Refusal], None], pod_with: Any, judge: Any, words: str
) -> None:
    consul_adds(Refusal("endpoint", words, words=True))

    assert _message(judge, pod_with(IN_A_SECRET["extra"], drop=IN_A_SECRET["drop"])) is None
    assert _message(judge, pod_with()) == words


# ---------------------------------------------------------------- every store, every refusal
_GOOD: dict[str, dict[str, Any]] = {
    "consul": {"endpoint": "http://consul:8500", "key": "app/config.json"},
    "vault": {"endpoint": "https://vault:8200", "key": "secret/app", "token": "t"},
    "config-server": {"endpoint": "http://cs:8888", "key": "app/prod"},
    "firestore": {"endpoint": "acme-prod", "key": "config/app"},
    "git": {"endpoint": "https://git.example/acme/config.git", "key": "app.yaml"},
    "redis": {"endpoint": "redis://redis:6379/0", "key": "app.json"},
    "etcd": {"endpoint": "http://etcd:2379", "key": "app.json"},
    "nats": {"endpoint": "nats://nats:4222", "key": "config/app.json"},
    "s3": {"endpoint": "myapp-config", "key": "prod/app.json"},
}
"""A spec each store accepts; every bad spec below is one of these with some inputs changed."""

_BAD: Sequence[dict[str, Any]] = (
    {"endpoint": ""},
    {"endpoint": "ftp://u:p@h/x?y#z"},
    {"endpoint": "http://u:p@host:port/path?q"},
    {"endpoint": "secret-backed"},
    {"endpoint": "http://h:1,nats://a@b/c"},
    {"key": ""},
    {"key": "folder/"},
    {"key": "a/b/noext"},
    {"key": "/.git/../x?y,z"},
    {"key": "a*/b>"},
    {"ref": "nope:x"},
    {"ref": "commit:abc"},
    {"ref": "bad..ref"},
    {"api_url": "ftp://u:p@x"},
    {"api_url": "http://"},
    {"namespace": "team", "ssh_key": "/k", "dynamic": True},
    {"auth": "nope"},
    {"auth": "token"},
    {"auth": "kubernetes", "token": "t", "auth_token_path": "/t"},
    {"auth": "jwt"},
    {"auth": "none", "token": "t"},
    {"auth": "anonymous", "token": "t", "auth_mount": "m"},
    {"auth": "ssh-key"},
    {"auth": "cert", "endpoint": "http://h:1"},
    {"auth": "emulator", "api_url": "not a host"},
    {"auth": "access-token"},
    {"auth": "metadata-server", "token": "t"},
    {"auth": "approle"},
    {"auth": "userpass", "auth_username": "a/b"},
    {"auth_role": "r", "auth_mount": "m", "auth_username": "u", "auth_token_path": "/t"},
    {"password": "p", "token": "t", "auth_username": "u"},
    {"password": "p"},
    {"timeout": -1.0},
    {"keys": tuple(f"k{n}.json" for n in range(70))},
    {"extra": {"bogus": "1", "format": "hcl", "wait": "0", "datacenter": "bad dc"}},
    {"extra": {"max_bytes": "1", "cache_dir": "rel", "known_hosts": "rel"}},
    {"extra": {"use_proxy": "sometimes", "follow_redirects": "maybe"}},
    {"tls": TlsSettings(cert_file="/c")},
    {"tls": TlsSettings(key_file="/k")},
    {"tls": TlsSettings(ca_file="/ca", skip_verify=True, server_name="n")},
    {"tls": TlsSettings(ca_file="-----BEGIN x", cert_file="-----BEGIN", key_file="/k")},
    {"endpoint": "http://h:1", "tls": TlsSettings(ca_file="/ca"), "api_url": "http://m:9"},
)


def _every_refusal() -> Iterator[tuple[str, Refusal]]:
    for name, good in _GOOD.items():
        store = default_registry().store(name)
        for bad in _BAD:
            spec = StoreSpec.from_inputs(source=name, **{**good, **bad})
            for refusal in store.refusals(spec):
                yield name, refusal


def test_the_matrix_reaches_every_kind_of_store_rule() -> None:
    found = list(_every_refusal())
    fields = {refusal.field for _, refusal in found}

    assert {name for name, _ in found} == set(_GOOD)
    assert len(found) > 400, len(found)
    assert {"endpoint", "key", "auth", "auth_role", "token", "password", "tls", "ref"} <= fields


def test_every_store_refusal_names_its_field_and_leaves_no_flag_in_the_webhooks_words() -> None:
    def spell(field: str) -> str:
        return annotation(input_key(field))

    for name, refusal in _every_refusal():
        assert refusal.field is not None, (name, refusal)
        text = refusal.render(spell)
        assert not re.search(r"(?<![\w/])--[a-z]", text), (name, text)
        assert "{field" not in text, (name, text)


@pytest.mark.parametrize("store", sorted(_GOOD))
def test_a_secret_backed_endpoint_leaves_only_endpoint_refusals(store: str) -> None:
    """What admission drops for an address in a Secret is all the placeholder can cause."""
    spec = StoreSpec.from_inputs(source=store, **{**_GOOD[store], "endpoint": "secret-backed"})
    refusals = default_registry().store(store).refusals(spec)

    assert {r.field for r in refusals} <= {"endpoint"}, refusals
