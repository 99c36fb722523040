"""A store's refusal at publish names the volume attribute (or Secret key) that sets the input."""

from __future__ import annotations

from dynconf.errors import Refusal
from dynconf.plugins import default_registry
from dynconf.stores import StoreSpec
from dynconf_k8s.node.attributes import attribute_spelling


def test_a_store_refusal_is_spelled_with_the_volume_attribute() -> None:
    spec = StoreSpec(source="consul", endpoint="http://consul:8500", key="a.json", auth_role="r")
    [refusal] = default_registry().store("consul").refusals(spec)

    assert refusal.render(attribute_spelling).startswith(
        'consul takes no the volume attribute "auth-role": its login names the auth method only'
    )


def test_a_credential_is_spelled_as_the_secret_key_that_carries_it() -> None:
    assert (
        Refusal("token", "etcd takes no token", "remove {field}", words=True).render(
            attribute_spelling
        )
        == 'etcd takes no token; remove the Secret key "token"'
    )
