#!/usr/bin/env bash
# ctest k8s_manifests: renders k8s/ offline with kustomize (the base, the node-critical and
# tenant-door components, the restricted-namespace client of examples/tenant, and an operator's
# overlay that replaces the keyring placeholder as secret-gossip.yaml describes),
# validates every object against the Kubernetes schemas and checks the fields tokentriage needs
# (check_manifests.cjs, which also proves each check can fail).
# usage: manifests.sh SOURCE_DIR CACHE_DIR
set -euo pipefail
src=$1 cache=$2
. "$src/tests/k8s/tools.sh"
tt_k8s_tools "$cache"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rel=$(realpath --relative-to="$work/x" "$src/k8s")

"$KUBECTL" kustomize "$src/k8s" > "$work/base.yaml"

mkdir "$work/nc"
printf 'resources: [%s]\ncomponents: [%s/components/node-critical]\n' "$rel" "$rel" \
  > "$work/nc/kustomization.yaml"
"$KUBECTL" kustomize "$work/nc" > "$work/node-critical.yaml"

mkdir "$work/td"
printf 'resources: [%s]\ncomponents: [%s/components/tenant-door]\n' "$rel" "$rel" \
  > "$work/td/kustomization.yaml"
"$KUBECTL" kustomize "$work/td" > "$work/tenant-door.yaml"
"$KUBECTL" kustomize "$src/k8s/examples/tenant" > "$work/tenant.yaml"

# The overlay from secret-gossip.yaml's instructions, with a freshly generated key.
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
"$KUBECTL" kustomize "$work/ov" > "$work/overlay.yaml"
NODE_PATH="$NODE_MODULES" node -e '
  const YAML = require("yaml"), fs = require("fs");
  const s = YAML.parseAllDocuments(fs.readFileSync(process.argv[1], "utf8")).map((d) => d.toJS())
    .find((o) => o.kind === "Secret" && o.metadata.name === "tokentriage-gossip");
  const key = fs.readFileSync(process.argv[2], "utf8");
  if (!s.data || Buffer.from(s.data["gossip.keys"], "base64").toString() !== key || s.stringData) {
    console.error("FAIL overlay: the generated keyring did not replace the placeholder"); process.exit(1);
  }
  console.log("ok   overlay: a generated keyring replaces the placeholder Secret");
' "$work/overlay.yaml" "$work/ov/gossip.keys"

NODE_PATH="$NODE_MODULES" node "$src/tests/k8s/check_manifests.cjs" \
  "$work/base.yaml" "$work/node-critical.yaml" "$src/k8s/examples/client-pod.yaml" \
  "$work/tenant-door.yaml" "$work/tenant.yaml" --self-test
