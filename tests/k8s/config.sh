#!/usr/bin/env bash
# ctest k8s_config_arms: the config inside the rendered ConfigMap (what the pods really mount)
# passes `tokentriage validate --arm --offline` (compiled as serve compiles it; the host checks
# need the node: its keyring file, its directories) with the environment the DaemonSet gives it
# and the tokens file of the rendered Secret where the config names it (arming reads
# server.tokens_file), and without that environment it is refused, naming the variables (so the
# downward API env is load-bearing).
# usage: config.sh SOURCE_DIR CACHE_DIR TOKENTRIAGE
set -euo pipefail
src=$1 cache=$2 tt=$3
. "$src/tests/k8s/tools.sh"
tt_k8s_tools "$cache"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$KUBECTL" kustomize "$src/k8s" > "$work/render.yaml"
NODE_PATH="$NODE_MODULES" node -e '
  const YAML = require("yaml"), fs = require("fs");
  const docs = YAML.parseAllDocuments(fs.readFileSync(process.argv[1], "utf8")).map((d) => d.toJS());
  const cm = docs.find((o) => o.kind === "ConfigMap" && o.metadata.name.startsWith("tokentriage-config"));
  const tokens = docs.find((o) => o.kind === "Secret" && o.metadata.name === "tokentriage-tokens");
  const path = YAML.parse(cm.data["tokentriage.yaml"]).server.tokens_file;
  /* the config as the pod reads it, its tokens file (mounted at /etc/tokentriage) beside it here */
  fs.writeFileSync(process.argv[2] + "/tokens.yaml", tokens.stringData["tokens.yaml"]);
  fs.writeFileSync(process.argv[2] + "/tokentriage.yaml",
                   cm.data["tokentriage.yaml"].replace(path, process.argv[2] + "/tokens.yaml"));
' "$work/render.yaml" "$work"

fail=0
if out=$(env -i NODE_NAME=node-a POD_IP=198.18.0.1 "$tt" validate --arm --offline "$work/tokentriage.yaml" 2>&1); then
  echo "ok   validate --arm with NODE_NAME and POD_IP: $out"
else
  echo "FAIL validate --arm with NODE_NAME and POD_IP:"; echo "$out"; fail=1
fi
if out=$(env -i "$tt" validate --arm --offline "$work/tokentriage.yaml" 2>&1); then
  echo "FAIL validate --arm accepted the config without NODE_NAME and POD_IP"; fail=1
elif grep -q NODE_NAME <<<"$out" && grep -q POD_IP <<<"$out"; then
  echo "ok   without the downward API env the config is refused, naming NODE_NAME and POD_IP"
else
  echo "FAIL without the env the error does not name NODE_NAME and POD_IP:"; echo "$out"; fail=1
fi
exit $fail
