#!/usr/bin/env bash
# ctest k8s_fleet_e2e: renders k8s/ as an operator deploys it (the overlay secret-gossip.yaml
# describes, with a freshly generated keyring), extracts what the DaemonSet runs, and starts that
# fleet in network namespaces (fleet_e2e.py).
# usage: fleet.sh SOURCE_DIR CACHE_DIR TOKENTRIAGE
set -euo pipefail
src=$1 cache=$2 tt=$3
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root for network namespaces and mounts" >&2; exit 77; }
. "$src/tests/k8s/tools.sh"
tt_k8s_tools "$cache"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The replicas run as the DaemonSet's non-root user, who may not be able to reach a build tree
# under a private (0700) directory: they run a copy from this world-readable one.
chmod 0755 "$work"
install -m 0755 "$tt" "$work/tokentriage"
tt=$work/tokentriage
rel=$(realpath --relative-to="$work/ov" "$src/k8s")
mkdir "$work/ov"
head -c 32 /dev/urandom | base64 > "$work/ov/gossip.keys"
cat > "$work/ov/kustomization.yaml" <<EOK
resources: [$rel]
secretGenerator:
  - name: tokentriage-gossip
    namespace: tokentriage
    behavior: replace
    files: [gossip.keys]
    options: { disableNameSuffixHash: true }
EOK
"$KUBECTL" kustomize "$work/ov" > "$work/render.yaml"
"$KUBECTL" kustomize "$src/k8s" > "$work/render-placeholder.yaml"
for r in render render-placeholder; do
  NODE_PATH="$NODE_MODULES" node "$src/tests/k8s/extract_deploy.cjs" \
    "$work/$r.yaml" "$src/k8s/examples/client-pod.yaml" "$work/$r.json"
done
# Debian's python3 carries python3-msgpack (scripts/deps.sh); a python3 earlier on PATH may not.
/usr/bin/python3 "$src/tests/k8s/fleet_e2e.py" "$tt" "$work/render.json" "$src/clients/python" \
  "$work/render-placeholder.json"
