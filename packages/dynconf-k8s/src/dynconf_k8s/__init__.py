"""dynconf on Kubernetes: the webhook, agent, operator and node agent (skeleton: each lands with its issue)."""
