"""``dynamic-config-agent``: fetch, render and publish one document, once or kept current.

The agent is a thin driver over dynconf's pipeline (``dynconf.pipeline``) and the store
plugins: :mod:`.flags` is the contract's command line, :mod:`.loop` the watch loop,
:mod:`.metrics` and :mod:`.server` the metrics port, :mod:`.notify`, :mod:`.canary`,
:mod:`.events` and :mod:`.trust` one feature each, :mod:`.main` the process.
"""

from dynconf_k8s.agent.flags import AgentSettings, UsageError, parse_args
from dynconf_k8s.agent.main import main, run
from dynconf_k8s.agent.metrics import AgentMetrics, AgentState

__all__ = ["AgentMetrics", "AgentSettings", "AgentState", "UsageError", "main", "parse_args", "run"]
