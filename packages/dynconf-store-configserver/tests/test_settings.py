"""The server's TOML: validated whole at start, every refusal naming the key and the fix."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dynconf_store_configserver.server.settings import SettingsError, load_settings, parse_settings

from .conftest import TOKEN, base_settings

pytestmark = pytest.mark.configserver


def refusals(raw, base: Path) -> list[str]:
    with pytest.raises(SettingsError) as caught:
        parse_settings(raw, base=base)
    return caught.value.reasons


def test_good_file_loads(config_dir):
    settings = parse_settings(base_settings(config_dir), base=config_dir.root)
    assert [s.name for s in settings.sections] == ["billing/prod", "shop/prod"]
    assert settings.sections[0].files == (config_dir.root / "billing.toml",)


def test_per_client_stream_ceiling_defaults_to_a_quarter(config_dir):
    raw = base_settings(config_dir, max_stream_connections=400)
    assert parse_settings(raw, base=config_dir.root).max_streams_per_client == 100


@pytest.mark.parametrize(
    ("change", "fix"),
    [
        (lambda s: s["server"].update(colour="red"), "server.colour is not a setting"),
        (lambda s: s.update(extra={}), "every setting lives under [server]"),
        (
            lambda s: s["server"]["sections"][0].update(filez=[]),
            "sections[0].filez is not a setting",
        ),
        (lambda s: s["server"]["clients"][0].update(token="short"), "shorter than 32 bytes"),
        (
            lambda s: s["server"]["sections"][0].update(files=["missing.toml"]),
            "not a readable file",
        ),
        (
            lambda s: s["server"]["sections"].append(dict(s["server"]["sections"][0])),
            "repeats billing/prod",
        ),
        (lambda s: s["server"]["sections"][0].update(application="bad name"), "must be a name"),
        (
            lambda s: s["server"].update(bind="0.0.0.0:8888"),
            "is not loopback and there is no [server.tls]",
        ),
        (lambda s: s["server"].update(bind="localhost:8888"), "literal address:port"),
        (
            lambda s: s["server"]["clients"][0].update(applications=["nowhere"]),
            "no section serves it",
        ),
        (lambda s: s["server"]["clients"][1].update(name="billing-pods"), "is named twice"),
        (lambda s: s["server"]["clients"][1].update(token=TOKEN), "reuses another client's token"),
        (lambda s: s["server"]["clients"][0].pop("token"), "set server.allow_anonymous"),
        (lambda s: s["server"].update(sections=[]), "there are no [[server.sections]]"),
        (lambda s: s["server"].update(metrics_token="short"), "metrics_token is shorter"),
        (
            lambda s: s["server"].update(metrics_token=TOKEN),
            "metrics_token is also a client's token",
        ),
        (
            lambda s: s["server"].update(max_stream_connections=8, max_streams_per_client=9),
            "max_streams_per_client 9 is above",
        ),
        (lambda s: s["server"].update(clients=[]), "nobody may read"),
        (
            lambda s: s["server"]["sections"][0].update(stores=[{"source": "nine"}]),
            "no store is named `nine`",
        ),
        (
            lambda s: s["server"]["sections"][0].update(stores=[{"source": "file", "key": "x"}]),
            "no extension naming a format",
        ),
        (
            lambda s: s["server"].update(
                kubernetes={
                    "api_server": "https://k:6443",
                    "ca": "billing.toml",
                    "token_path": "billing.toml",
                    "grants": [{"service_account": "nocolon", "applications": ["billing"]}],
                }
            ),
            "namespace:serviceaccount",
        ),
        (
            lambda s: s["server"].update(
                kubernetes={
                    "api_server": "https://k:6443",
                    "ca": "billing.toml",
                    "token_path": "billing.toml",
                }
            ),
            "has no grants",
        ),
    ],
)
def test_wrong_files_are_refused_naming_the_fix(config_dir, change, fix):
    raw = base_settings(config_dir)
    change(raw)
    found = refusals(raw, config_dir.root)
    assert any(fix in reason for reason in found), found


def test_every_refusal_is_reported_at_once(config_dir):
    raw = base_settings(config_dir, colour="red", bind="nope")
    raw["server"]["clients"][0]["token"] = "short"
    assert len(refusals(raw, config_dir.root)) >= 3


def test_refusals_never_quote_a_token(config_dir):
    raw = base_settings(config_dir)
    raw["server"]["clients"][0]["token"] = "tiny-secret"
    raw["server"]["clients"][1]["token"] = TOKEN
    assert not any("tiny-secret" in r or TOKEN in r for r in refusals(raw, config_dir.root))


def test_key_readable_by_others_is_refused(config_dir, pki, tmp_path):
    loose = tmp_path / "loose-key.pem"
    loose.write_bytes(pki.server_key.read_bytes())
    loose.chmod(0o644)
    raw = base_settings(config_dir, tls={"certificate": str(pki.server_cert), "key": str(loose)})
    assert any("chmod 600" in r for r in refusals(raw, config_dir.root))


def test_command_line_refuses_with_every_reason_and_exit_2(config_dir):
    path = config_dir.write("server.toml", '[server]\ncolour = "red"\n')
    result = subprocess.run(
        [sys.executable, "-m", "dynconf_store_configserver.server.main", str(path)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2
    assert "server.colour is not a setting" in result.stderr
    assert "there are no [[server.sections]]" in result.stderr


def test_load_settings_resolves_paths_from_the_file(config_dir):
    config_dir.write(
        "server.toml",
        f'''
[server]
[[server.sections]]
application = "billing"
profile = "prod"
files = ["billing.toml"]
[[server.clients]]
name = "b"
token = "{TOKEN}"
applications = ["billing"]
''',
    )
    settings = load_settings(config_dir.root / "server.toml")
    assert settings.sections[0].files[0] == config_dir.root / "billing.toml"


BOOK_SERVER_TOML = Path(__file__).parent / "cases" / "book-server.toml"


def test_book_server_toml_with_top_level_kubernetes_loads(config_dir):
    book = config_dir.write("server.toml", BOOK_SERVER_TOML.read_text(encoding="utf-8"))
    settings = load_settings(book)
    assert settings.kubernetes is not None
    assert settings.kubernetes.grants == {"shop:shop": frozenset({"shop"})}
    assert [c.name for c in settings.clients] == ["billing-pods"]


def test_kubernetes_under_both_names_is_refused(config_dir):
    text = BOOK_SERVER_TOML.read_text(encoding="utf-8")
    text = (
        text.replace("[kubernetes]", "[server.kubernetes]").replace(
            "[[kubernetes.grants]]", "[[server.kubernetes.grants]]"
        )
        + '\n[kubernetes]\napi_server = "https://k:6443"\n'
    )
    with pytest.raises(SettingsError) as caught:
        load_settings(config_dir.write("server.toml", text))
    assert any("[kubernetes] and as [server.kubernetes]" in r for r in caught.value.reasons)


def test_top_level_kubernetes_refusals_name_its_own_spelling(config_dir):
    text = BOOK_SERVER_TOML.read_text(encoding="utf-8").replace(
        'service_account = "shop:shop"', 'service_account = "nocolon"'
    )
    with pytest.raises(SettingsError) as caught:
        load_settings(config_dir.write("server.toml", text))
    assert any(r.startswith("kubernetes.grants[0].service_account") for r in caught.value.reasons)


def test_a_store_refusal_names_the_settings_key_that_sets_the_input(config_dir):
    raw = base_settings(config_dir)
    store = {"source": "consul", "endpoint": "http://c:8500", "key": "a.json", "auth_role": "r"}
    raw["server"]["sections"][0].update(stores=[store])

    found = refusals(raw, config_dir.root)

    assert any(
        "consul takes no server.sections[0].stores[0].auth_role: its login names" in reason
        for reason in found
    ), found
