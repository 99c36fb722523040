pytest_plugins = [
    "tests.fixtures.servers",
    "tests.fixtures.kube",
    "tests.fixtures.node",
    "tests.fixtures.registry",
    "tests.fixtures.otlp",
    "tests.fixtures.hostile",
    "tests.fixtures.uv",
    "tests.fixtures.threads",
    "tests.fixtures.background",
    "tests.fixtures.clock",
    "tests.fixtures.socket_bytes",
]
