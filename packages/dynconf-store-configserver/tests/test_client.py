"""The client store against the real server: fetch, auth, 404 as ABSENT, the SSE watch."""

from __future__ import annotations

import json
import logging
import queue
import threading
import time

import pytest

from dynconf.errors import AuthError, BackendError, RemoteError
from dynconf.plugins import discover
from dynconf.stores import ABSENT, Fetched, StoreSpec, TlsSettings, WatchCapability
from dynconf_store_configserver.plugin import CONFIG_SERVER_STORE

from .conftest import TOKEN, client_source, free_port

pytestmark = pytest.mark.configserver


def spec(**fields: object) -> StoreSpec:
    base = {"source": "config-server", "endpoint": "http://config.infra.svc:8888",
            "key": "billing/prod"}  # fmt: skip
    return StoreSpec.from_inputs(**{**base, **fields})  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- validate
def test_discovery_finds_the_store_without_importing_requests_or_the_server():
    import subprocess
    import sys

    assert discover().store("config-server") is CONFIG_SERVER_STORE
    probe = (
        "import sys\nfrom dynconf.plugins import discover\nfrom dynconf.stores import StoreSpec\n"
        "discover().store('config-server').validate(StoreSpec(source='config-server', "
        "endpoint='http://c:1', key='a/b'))\n"
        "print('requests' in sys.modules, 'starlette' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            check=True)  # fmt: skip
    assert result.stdout.strip() == "False False"


@pytest.mark.parametrize("fields", [
    {}, {"token": "t"}, {"auth": "token", "token": "t"}, {"auth": "none"},
    {"auth": "kubernetes"}, {"auth": "kubernetes", "auth_token_path": "/var/run/t"},
    {"endpoint": "https://c:8443/prefix", "tls": TlsSettings(ca_file="/ca.pem")},
])  # fmt: skip
def test_valid_specs_pass(fields):
    assert CONFIG_SERVER_STORE.validate(spec(**fields)) == []


@pytest.mark.parametrize(("fields", "fix"), [
    ({"endpoint": ""}, "needs --endpoint"),
    ({"endpoint": "config:8888"}, "http:// or https://"),
    ({"endpoint": "http://u:p@c:1"}, "carries credentials"),
    ({"key": "billing"}, "<application>/<profile>"),
    ({"key": "bill ing/prod"}, "<application>/<profile>"),
    ({"auth": "token"}, "needs a token"),
    ({"auth": "none", "token": "t"}, "use --auth token"),
    ({"auth": "kubernetes", "token": "t"}, "remove it, or use --auth token"),
    ({"auth_token_path": "/t"}, "add --auth kubernetes"),
    ({"auth": "jwt"}, "use one of: kubernetes, none, token"),
    ({"auth_mount": "m"}, "takes no --auth-mount"),
    ({"tls": TlsSettings(ca_file="/ca.pem")}, "need an https://"),
    ({"endpoint": "https://c", "tls": TlsSettings(cert_file="/c.pem")}, "--tls-cert needs --tls-key"),
    ({"extra": {"x": "y"}}, "x is not a setting config-server reads"),
])  # fmt: skip
def test_wrong_specs_are_refused_naming_the_fix(fields, fix):
    found = CONFIG_SERVER_STORE.validate(spec(**fields))
    assert any(fix in reason for reason in found), found


def test_describe_redacts_even_an_unparsable_url():
    bad = "http://admin:p@ss:w0rd@config:port"
    assert "w0rd" not in CONFIG_SERVER_STORE.describe(spec(endpoint=bad))
    assert not any("w0rd" in r for r in CONFIG_SERVER_STORE.validate(spec(endpoint=bad)))
    assert CONFIG_SERVER_STORE.describe(spec(token="s3cret")) == (
        "config server http://config.infra.svc:8888 billing/prod"
    )


def test_build_refuses_what_validate_refuses():
    with pytest.raises(BackendError, match="needs a token"):
        CONFIG_SERVER_STORE.build(spec(auth="token"))


# ---------------------------------------------------------------------------- fetch
def test_fetch_answers_the_config_with_the_generation_as_revision(billing):
    answer = client_source(billing.url).fetch()
    assert isinstance(answer, Fetched)
    assert answer.format == "json"
    assert answer.revision == "1"
    assert json.loads(answer.text)["db"]["host"] == "db.prod"


def test_refused_token_is_auth(billing):
    with pytest.raises(AuthError, match="refused the credential"):
        client_source(billing.url, token="x" * 40).fetch()
    with pytest.raises(AuthError):
        client_source(billing.url, auth="none").fetch()


def test_not_granted_and_not_present_are_both_absent(billing):
    assert client_source(billing.url, key="shop/prod").fetch() is ABSENT
    assert client_source(billing.url, key="billing/staging").fetch() is ABSENT


def test_unreachable_server_is_a_prompt_remote_error():
    started = time.monotonic()
    with pytest.raises(RemoteError, match="cannot be reached"):
        client_source(f"http://127.0.0.1:{free_port()}", timeout=2.0).fetch()
    assert time.monotonic() - started < 3


def test_token_file_is_reread_at_every_fetch(billing, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    source = client_source(billing.url, auth="kubernetes", auth_token_path=str(token_file))
    assert isinstance(source.fetch(), Fetched)
    token_file.write_text("rotated-but-unknown-token-000000000000\n")
    with pytest.raises(AuthError):
        source.fetch()
    token_file.unlink()
    with pytest.raises(AuthError, match="cannot read the service-account token"):
        source.fetch()


def test_no_token_or_value_in_errors_or_logs(billing, caplog, tmp_path):
    caplog.set_level(logging.DEBUG)
    secret = "planted-secret-token-000000000000000000"
    with pytest.raises(AuthError) as caught:
        client_source(billing.url, token=secret).fetch()
    answer = client_source(billing.url).fetch()
    for text in (str(caught.value), repr(caught.value), caplog.text, repr(answer)):
        assert secret not in text and "db.prod" not in text


# ---------------------------------------------------------------------------- watch
class Watch:
    def __init__(self, source, interval: float = 0.5) -> None:
        self.source = source
        self.items: queue.Queue = queue.Queue()
        self.failures: list = []
        self.error: BaseException | None = None
        self._stop = threading.Event()
        source.on_failure = self.failures.append
        self.thread = threading.Thread(target=self._run, args=(interval,), daemon=True)
        self.thread.start()

    def _run(self, interval: float) -> None:
        try:
            for item in self.source.changes(interval, self._stop.is_set):
                self.items.put(item)
        except BaseException as exc:
            self.error = exc

    def wait_connected(self, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while not self.source.connected:
            assert self.error is None, self.error
            assert time.monotonic() < deadline
            time.sleep(0.02)
        time.sleep(0.2)  # the opening event's priming fetch

    def next(self, timeout: float = 10):
        return self.items.get(timeout=timeout)

    def quiet(self, seconds: float) -> bool:
        try:
            self.items.get(timeout=seconds)
        except queue.Empty:
            return True
        return False

    def stop(self) -> float:
        started = time.monotonic()
        self._stop.set()
        self.thread.join(10)
        return time.monotonic() - started


@pytest.fixture
def watch():
    started: list[Watch] = []

    def start(source, interval: float = 0.5) -> Watch:
        w = Watch(source, interval)
        started.append(w)
        return w

    yield start
    for w in started:
        w.stop()


def test_capability_is_push(billing):
    assert client_source(billing.url).capability is WatchCapability.PUSH


def test_change_is_pushed_and_the_start_is_not_announced(billing, config_dir, watch):
    w = watch(client_source(billing.url))
    w.wait_connected()
    assert w.quiet(1.0)
    config_dir.write("billing.prod.toml", '[billing.db]\nhost = "db.pushed"\n')
    delivered = w.next()
    assert json.loads(delivered.text)["db"]["host"] == "db.pushed"
    assert delivered.revision == "2"


def test_rewrite_with_identical_content_is_not_delivered(billing, config_dir, watch):
    w = watch(client_source(billing.url))
    w.wait_connected()
    config_dir.write("billing.prod.toml", '[billing.db]\nhost = "db.prod"\n\n')  # same document
    assert w.quiet(1.0)


def test_stop_takes_about_a_quarter_second(billing, watch):
    w = watch(client_source(billing.url))
    w.wait_connected()
    assert w.stop() < 1.0


def test_refused_credential_ends_the_watch_with_auth(billing, watch):
    w = watch(client_source(billing.url, token="y" * 40))
    w.thread.join(10)
    assert isinstance(w.error, AuthError)


def test_section_not_granted_is_absent_in_the_watch_too(billing, watch):
    w = watch(client_source(billing.url, key="shop/prod"))
    assert w.quiet(1.0)  # ABSENT from the start: nothing changed
    assert w.error is None
