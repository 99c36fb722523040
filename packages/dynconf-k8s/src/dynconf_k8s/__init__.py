"""dynconf on Kubernetes: the webhook, agent, operator and node agent.

Each piece lands with its issue; see the subpackages.
"""
