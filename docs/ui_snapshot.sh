#!/usr/bin/env bash
# Headless screenshots of the Dagster UI into docs/ (`make ui-snapshot`): the asset graph and one asset's
# materialization page, and after a `make run` the Runs page and the champion. Installs Debian's chromium when
# missing; the server runs in its own process session on 127.0.0.1 and is stopped by its PID.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }
port=${PORT:-3099}
export DAGSTER_HOME=$PWD XC_DAGSTER_STATE=${XC_DAGSTER_STATE:-$PWD/.dagster_home}
mkdir -p "$XC_DAGSTER_STATE"
setsid .venv/bin/dagster dev -w workspace.yaml -h 127.0.0.1 -p "$port" > "$XC_DAGSTER_STATE/ui-snapshot.log" 2>&1 &
pid=$!
trap 'kill -TERM -- -$pid 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do curl -sf "http://127.0.0.1:$port/server_info" >/dev/null && break; sleep 1; done
shot() {  # url, output
  chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --user-data-dir="$(mktemp -d)" --hide-scrollbars \
    --window-size=1600,1000 --virtual-time-budget=15000 --screenshot="$2" "$1" 2>/dev/null
}
shot "http://127.0.0.1:$port/asset-groups/synthetic" docs/asset-graph.png
shot "http://127.0.0.1:$port/assets/synthetic/anchor_sets" docs/asset-anchor-sets.png
# after a `make run`: its runs under their named jobs, and the champion in sync with the gate that last ran (#66)
shot "http://127.0.0.1:$port/runs" docs/runs-named-jobs.png
shot "http://127.0.0.1:$port/assets/synthetic/champion" docs/asset-champion.png
echo "saved docs/asset-graph.png docs/asset-anchor-sets.png docs/runs-named-jobs.png docs/asset-champion.png"
