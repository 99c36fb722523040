"""What the freshness tests borrow from the agent's own tests, not a second copy of it.

The agent runs as the cluster runs it, a real ``dynamic-config-agent`` subprocess
(``packages/dynconf-k8s/tests/agent/conftest.py``: :class:`AgentProcess`, the ``agent``
fixture, the ``cut_proxy`` relay factory), and each push store is reached and written
through the agent tests' harness (``test_stores.py``: one :class:`Harness` per store on the
session's real server, the config server a real one on a thread). That directory's name is
not an identifier, so it is imported by its module name, the one pytest's importlib mode
gives it; a session that collects both shares the one module.
"""

from __future__ import annotations

import importlib

agent_support = importlib.import_module("packages.dynconf-k8s.tests.agent.conftest")
store_support = importlib.import_module("packages.dynconf-k8s.tests.agent.test_stores")

# fixtures, used by name
agent = agent_support.agent
cut_proxy = agent_support.cut_proxy
consul = store_support.consul
etcd = store_support.etcd
redis = store_support.redis
nats = store_support.nats
firestore = store_support.firestore
configserver = store_support.configserver
