#!/usr/bin/env bash
# Install dynamic-config-agent with all nine stores + file into PREFIX/venv, pinned by uv.lock,
# and bake the plugin lock at PREFIX/plugins.lock. Dockerfile.agent runs exactly this; the test
# suite runs it into a temporary prefix to prove the same steps produce a working agent.
#
#   docker/agent-install.sh PREFIX [PYTHON] [CLIENTS]
#
# CLIENTS is `all` (the default: every store's client library) or `none`: the nine store
# plugins still install (their declarations validate specs), but only the engine's own
# third-party requirements, for a program that never talks to a store (the webhook).
#
# uv is $UV when set (scripts/dev and the tests set it to the uv they bootstrapped), else `uv`
# on PATH (the images copy it to /usr/local/bin).
set -euo pipefail
prefix=${1:?usage: agent-install.sh PREFIX [PYTHON]}
python=${2:-python3}
clients=${3:-all}
case "$clients" in
  all) selection=(--all-packages) ;;
  none) selection=(--package dynconf-k8s) ;;
  *) echo "agent-install.sh: CLIENTS is all or none, not $clients" >&2; exit 2 ;;
esac
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
uv=${UV:-uv}

"$uv" venv --quiet --python "$python" "$prefix/venv"
# third-party requirements exactly as uv.lock pins them (no dev group, no workspace members),
# with the agent's `otel` extra: OTLP traces when OTEL_EXPORTER_OTLP_ENDPOINT is set
"$uv" export --quiet --frozen --no-dev --no-emit-workspace "${selection[@]}" --no-hashes \
  --extra otel --output-file "$prefix/requirements.txt"
"$uv" pip install --quiet --python "$prefix/venv/bin/python" -r "$prefix/requirements.txt"
# the workspace members themselves: the engine, the nine stores, the agent
"$uv" pip install --quiet --python "$prefix/venv/bin/python" --no-deps \
  ./packages/dynconf-core ./packages/dynconf-k8s \
  ./packages/dynconf-store-consul ./packages/dynconf-store-vault ./packages/dynconf-store-etcd \
  ./packages/dynconf-store-redis ./packages/dynconf-store-nats ./packages/dynconf-store-s3 \
  ./packages/dynconf-store-git ./packages/dynconf-store-firestore \
  ./packages/dynconf-store-configserver
# the lock the agent loads by default: exactly these plugins, at these versions
"$prefix/venv/bin/dynconf" plugins lock --output "$prefix/plugins.lock"
"$prefix/venv/bin/dynconf" plugins check "$prefix/plugins.lock" >&2
# Bytecode for every installed module, so no start compiles source: the images run with a
# read-only root and PYTHONDONTWRITEBYTECODE, where a missing .pyc is recompiled on every
# start (a hundred agents starting at once on a node spend their CPU on it). unchecked-hash:
# the layers' files carry mtime 0, which would make timestamp-checked .pyc files look stale.
"$prefix/venv/bin/python" -m compileall -q -f -j 0 --invalidation-mode unchecked-hash \
  "$prefix/venv/lib" >/dev/null
