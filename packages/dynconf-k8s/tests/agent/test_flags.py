"""The command line as the contract spells it: refusals, defaults, and what reaches the spec."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from dynconf_k8s.agent.canary import Canary, bucket, read_percent
from dynconf_k8s.agent.flags import (
    VALUE_FLAGS,
    UsageError,
    help_text,
    output_extensions,
    parse_args,
)
from dynconf_k8s.agent.notify import (
    NotifyTarget,
    NotifyUrlError,
    parse_notify_url,
    send_notification,
)

from .conftest import AGENT

BASE = [
    "--source",
    "consul",
    "--endpoint",
    "http://127.0.0.1:8500",
    "--key",
    "app/config.json",
    "--out",
    "/tmp/x/app.json",
]


def refused(argv: list[str], env: dict[str, str] | None = None) -> str:
    with pytest.raises(UsageError) as caught:
        parse_args(argv, env or {})
    return str(caught.value)


def test_unknown_flag_is_refused_by_name() -> None:
    assert refused([*BASE, "--watch-seconds", "5"]) == 'unknown flag "--watch-seconds"'


def test_flag_without_value_is_refused() -> None:
    assert refused([*BASE, "--section"]) == "--section needs a value"


def test_equals_form_is_an_unknown_flag() -> None:
    assert refused([*BASE, "--watch=5"]) == 'unknown flag "--watch=5"'


def test_endpoint_comes_from_the_environment_when_absent() -> None:
    argv = ["--source", "consul", "--key", "a.json", "--out", "/tmp/a.json"]
    assert refused(argv) == (
        "--endpoint is required; give the store's address or DYNAMIC_CONFIG_AGENT_ENDPOINT"
    )
    settings = parse_args(argv, {"DYNAMIC_CONFIG_AGENT_ENDPOINT": "http://c:8500"})
    assert settings.spec.endpoint == "http://c:8500"
    flag_wins = parse_args(
        [*argv, "--endpoint", "http://d:8500"], {"DYNAMIC_CONFIG_AGENT_ENDPOINT": "http://c:8500"}
    )
    assert flag_wins.spec.endpoint == "http://d:8500"


def test_secrets_come_from_the_environment_only() -> None:
    assert "DYNAMIC_CONFIG_AGENT_TOKEN" in refused([*BASE, "--token", "s3cr3t"])
    settings = parse_args(
        BASE, {"DYNAMIC_CONFIG_AGENT_TOKEN": "tok-9x", "DYNAMIC_CONFIG_AGENT_PASSWORD": "pw-7y"}
    )
    assert (settings.spec.token, settings.spec.password) == ("tok-9x", "pw-7y")
    assert "tok-9x" not in repr(settings.spec) and "pw-7y" not in repr(settings.spec)


def test_source_must_be_a_store_name() -> None:
    message = refused(
        ["--source", "Zoo/keeper", "--endpoint", "x", "--key", "k", "--out", "/o.json"]
    )
    assert "consul, vault, config-server, firestore, git, redis, etcd, nats, s3" in message


def test_out_extension_must_name_a_format_unless_templated() -> None:
    argv = [*BASE[:-1], "/tmp/x/app.conf"]
    assert refused(argv).startswith("--out has no extension a format writes; use .env")
    settings = parse_args([*argv, "--template-inline", "x={{ a }}"], {})
    assert settings.request.main.template is not None


def test_template_and_template_inline_exclude_each_other() -> None:
    assert "exclude each other" in refused([*BASE, "--template", "/t", "--template-inline", "x"])


def test_watch_takes_whole_seconds_clamped_to_one() -> None:
    assert refused([*BASE, "--watch", "1.5"]) == "--watch takes whole seconds, for example 15"
    assert parse_args([*BASE, "--watch", "0"], {}).watch == 1
    assert parse_args([*BASE, "--watch", "15"], {}).watch == 15
    assert parse_args([*BASE, "--watch", "15", "--one-shot"], {}).watch is None


def test_file_mode_is_octal_and_owner_readable() -> None:
    assert parse_args([*BASE, "--file-mode", "0o640"], {}).request.main.mode == 0o640
    assert parse_args([*BASE, "--file-mode", "0600"], {}).request.main.mode == 0o600
    assert "past 0777" in refused([*BASE, "--file-mode", "01777"])
    assert "owner unable to read" in refused([*BASE, "--file-mode", "0044"])


def test_also_outputs_share_the_fetch_and_default_to_the_main_mode() -> None:
    settings = parse_args(
        [
            *BASE,
            "--file-mode",
            "0640",
            "--also",
            "out=/tmp/x/db.yaml,section=db",
            "--also",
            "out=/tmp/x/c.toml,mode=0600",
        ],
        {},
    )
    _main, db, cache = settings.request.outputs
    assert (db.path, db.section, db.mode) == (Path("/tmp/x/db.yaml"), "db", 0o640)
    assert cache.mode == 0o600
    assert "needs out=<path>" in refused([*BASE, "--also", "section=db"])
    assert "has no extension" in refused([*BASE, "--also", "out=/tmp/x/db.txt"])


def test_every_loaded_format_is_a_writable_extension() -> None:
    """The book writes `.env` with no template: the format registry decides, not a list here."""
    settings = parse_args([*BASE, "--also", "out=/tmp/x/db.env,section=database"], {})
    assert settings.request.outputs[1].path == Path("/tmp/x/db.env")
    assert {".env", ".json", ".properties", ".toml", ".yaml", ".yml", ".ini"} <= set(
        output_extensions()
    )


def test_help_lists_every_writable_format_the_registry_loaded() -> None:
    [line] = [ln for ln in help_text().splitlines() if ln.startswith("Output formats")]
    assert line.split(": ", 1)[1].split() == list(output_extensions())
    assert ".env" in line.split()


def test_a_format_that_cannot_be_written_is_no_output_extension() -> None:
    from dynconf.plugins import default_registry

    readonly = [
        f".{ext}"
        for fmt in default_registry().formats.values()
        if fmt.dump is None
        for ext in fmt.extensions
    ]
    assert not set(readonly) & set(output_extensions())


def test_max_staleness_accepts_seconds_or_a_duration() -> None:
    assert parse_args([*BASE, "--max-staleness", "300"], {}).max_staleness == 300
    assert parse_args([*BASE, "--max-staleness", "6h"], {}).max_staleness == 6 * 3600
    assert "cannot be zero" in refused([*BASE, "--max-staleness", "0"])
    assert "duration" in refused([*BASE, "--max-staleness", "soon"])


def test_policies_are_checked() -> None:
    settings = parse_args(BASE, {})
    assert (settings.startup_policy, settings.on_delete, settings.on_drift) == (
        "allow-cached",
        "retain",
        "warn",
    )
    assert "allow-cached, require-fresh or best-effort" in refused([*BASE, "--startup-policy", "x"])
    assert "retain, remove or fail" in refused([*BASE, "--on-delete", "keep"])
    assert "warn, repair or fail" in refused([*BASE, "--on-drift", "fix"])


def test_history_keeps_at_most_ten() -> None:
    assert parse_args([*BASE, "--history", "3"], {}).request.history == 3
    assert "at most 10" in refused([*BASE, "--history", "11"])


@pytest.mark.parametrize("store", ["consul", "git", "s3", "nats", "redis", "etcd"])
def test_timeout_reaches_the_spec_of_every_store(store: str) -> None:
    """Each store reads ``StoreSpec.timeout`` (a common input); no list here says otherwise."""
    argv = ["--source", store, "--endpoint", "x://h", "--key", "k.json", "--out", "/o/o.json"]
    assert parse_args([*argv, "--timeout", "5"], {}).spec.timeout == 5


def test_events_need_the_pod_name() -> None:
    assert "DYNAMIC_CONFIG_POD_NAME" in refused([*BASE, "--events"])
    assert parse_args([*BASE, "--events"], {"DYNAMIC_CONFIG_POD_NAME": "p"}).events


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (
            "http://127.0.0.1:8080/-/reload",
            NotifyTarget("127.0.0.1", "127.0.0.1", 8080, "/-/reload"),
        ),
        ("http://localhost:9000", NotifyTarget("localhost", "127.0.0.1", 9000, "/")),
        ("http://[::1]:81/x", NotifyTarget("::1", "::1", 81, "/x")),
        ("http://::1:81/x", NotifyTarget("::1", "::1", 81, "/x")),
    ],
)
def test_notify_accepts_loopback_only(url: str, expected: NotifyTarget) -> None:
    assert parse_notify_url(url) == expected


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("https://127.0.0.1:8080/", "must start with http://"),
        ("http://10.0.0.1:8080/", "is not loopback"),
        ("http://app.internal:8080/", "is not loopback"),
        ("http://127.0.0.1/", "needs a port"),
        ("http://127.0.0.1:99999/", "no valid port"),
        ("http://127.0.0.1:\uff18\uff10/", "no valid port"),
        ("http://127.0.0.1:8080/a\r\nX-Smuggled: 1", "control character"),
        ("http://127.0.0.1:8080/a b", "control character"),
        ("http://127.0.0.1:8080/a\x00", "control character"),
    ],
)
def test_notify_refusals(url: str, why: str) -> None:
    assert why in refused([*BASE, "--notify-http", url])


@pytest.mark.parametrize("url", ["http://127.0.0.1:1/\ud800", "http://127.0.0.1:1/?q=\udcff"])
def test_notify_url_with_a_lone_surrogate_is_refused_not_raised(url: str) -> None:
    with pytest.raises(NotifyUrlError, match="lone surrogate"):
        parse_notify_url(url)


def test_notify_path_is_percent_encoded_ascii() -> None:
    target = parse_notify_url("http://127.0.0.1:8080/r\u00e9load?x=%41#frag")
    assert target.path == "/r%C3%A9load?x=%41"
    assert parse_notify_url("http://localhost:81?x=1").path == "/?x=1"


def test_notification_with_an_unencodable_path_is_not_fatal() -> None:
    import anyio

    target = NotifyTarget("127.0.0.1", "127.0.0.1", 9, "/r\u00e9load")
    assert anyio.run(send_notification, target) is False


def test_canary_bucket_is_the_first_two_sha256_bytes_mod_100(tmp_path: Path) -> None:
    # sha256("unnamed") starts 0x2a 0x9d... → 10909 % 100 = 9, computed independently here
    import hashlib

    expected = int.from_bytes(hashlib.sha256(b"web-7d9f-abcde").digest()[:2], "big") % 100
    assert bucket("web-7d9f-abcde") == expected
    percent = tmp_path / "percent"
    canary = Canary(percent, "web-7d9f-abcde")
    assert canary.admits() and canary.percent == 100  # missing file: no canary
    percent.write_text("garbage")
    assert canary.admits() and canary.percent == 100
    percent.write_text(" 0\n")
    assert not canary.admits() and canary.percent == 0
    percent.write_text("250")
    assert read_percent(percent) == 100 and canary.admits()


def test_store_validate_refuses_with_the_usage_text(tmp_path: Path) -> None:
    result = subprocess.run(
        [str(AGENT), *BASE, "--ref", "main"], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 1
    assert result.stderr.startswith(
        "dynamic-config-agent: --ref is git's; remove it for a consul source"
    )
    assert "usage: dynamic-config-agent" in result.stderr


def test_unknown_flag_exits_one_with_usage() -> None:
    result = subprocess.run([str(AGENT), "--nope"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 1
    assert result.stderr.startswith('dynamic-config-agent: unknown flag "--nope"\n')
    assert "usage:" in result.stderr


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--metrics-addr", "0.0.0.0:\uff19\uff11\uff11\uff10"), ("--watch", "\u0663\u0660"),
     ("--history", "\uff13"), ("--max-document-bytes", "\uff11\uff10")],
)  # fmt: skip
def test_numbers_are_ascii_digits_only(flag: str, value: str) -> None:
    assert flag in refused([*BASE, flag, value])


@pytest.mark.parametrize("flag", sorted(VALUE_FLAGS - {"--source"}))
def test_a_flag_value_that_is_not_utf8_is_refused_naming_the_flag(flag: str) -> None:
    message = refused([*BASE, flag, "a\udcff.json"])
    assert message == f"{flag} holds bytes that are not UTF-8 text; give it as UTF-8"


@pytest.mark.parametrize(
    "name",
    ["DYNAMIC_CONFIG_AGENT_ENDPOINT", "DYNAMIC_CONFIG_AGENT_TOKEN", "DYNAMIC_CONFIG_AGENT_PASSWORD",
     "DYNAMIC_CONFIG_POD_NAME", "DYNAMIC_CONFIG_POD_UID"],
)  # fmt: skip
def test_an_environment_value_that_is_not_utf8_is_refused_naming_the_variable(name: str) -> None:
    message = refused(BASE, {name: "s3cr3t\udcff"})
    assert message == f"{name} holds bytes that are not UTF-8 text; give it as UTF-8"


def test_argv_bytes_that_are_not_utf8_exit_one_with_one_usage_line() -> None:
    argv = [arg.encode() for arg in BASE[:-1]] + [b"/tmp/x/app\xff.json"]
    result = subprocess.run([bytes(AGENT), *argv], capture_output=True, timeout=30)
    assert result.returncode == 1
    first, _, rest = result.stderr.partition(b"\n")
    assert (
        first
        == b"dynamic-config-agent: --out holds bytes that are not UTF-8 text; give it as UTF-8"
    )
    assert rest.startswith(b"\nusage: dynamic-config-agent")


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--out", "/tmp/" + "L" * 2000), ("--on-drift", "x" * 5000), ("--file-mode", "7" * 3000),
     ("--metrics-addr", "h" * 3000), ("--also", "out=/tmp/" + "L" * 2000),
     ("--source", "S" * 3000), ("--" + "u" * 3000, "1")],
)  # fmt: skip
def test_a_refusal_cuts_a_long_value_short(flag: str, value: str) -> None:
    message = refused([*BASE, flag, value])
    assert len(message) < 500, len(message)
    assert value not in message
    assert flag in VALUE_FLAGS or "…" in message  # an unknown flag is named, cut short


def test_a_refusal_never_repeats_the_value_it_refuses() -> None:
    message = refused([*BASE, "--on-drift", "warn\nfail\x1b[31m"])
    assert message == "--on-drift takes warn, repair or fail"


def test_the_document_ceiling_reaches_the_store_as_well_as_the_render() -> None:
    """A store that learns a value's size first (redis, s3) refuses one past it unread."""
    settings = parse_args([*BASE, "--max-document-bytes", "1000"], {})
    assert settings.request.max_document_bytes == settings.spec.max_bytes == 1000
    default = parse_args(BASE, {})
    assert default.spec.max_bytes == default.request.max_document_bytes == 8 * 1024 * 1024
