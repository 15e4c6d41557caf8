// Reads a rendered k8s/ deployment and writes, as JSON, what a node of the cluster-in-namespaces
// test must reproduce: the daemon container's command, its env (downward API references kept as
// references), its user, its volume mounts with the files the kubelet would project into them,
// its probes and the client example's container. fleet_e2e.py starts replicas from this alone,
// so the test runs exactly what the DaemonSet runs.
// usage: node extract_deploy.cjs RENDER.yaml CLIENT_POD.yaml OUT.json
"use strict";
const fs = require("fs");
const YAML = require("yaml");

const [renderFile, clientFile, outFile] = process.argv.slice(2);
const docs = (f) => YAML.parseAllDocuments(fs.readFileSync(f, "utf8")).map((d) => d.toJS()).filter((o) => o);
const objs = docs(renderFile);
const find = (kind, name) => objs.find((o) => o.kind === kind && (!name || o.metadata.name === name));

const ds = find("DaemonSet");
const pod = ds.spec.template.spec;
const ctr = pod.containers.find((c) => c.name === "tokentriage");
const named = (name) => (ctr.ports || []).find((p) => p.name === name || p.containerPort === name);

// What the kubelet puts in a configMap/secret source: every item's key at its path.
function projectSource(kind, src) {
  const obj = find(kind === "configMap" ? "ConfigMap" : "Secret", src.name);
  if (!obj) throw new Error(`${kind} ${src.name} is not in the render`);
  const value = (key) =>
    obj.stringData?.[key] ?? (obj.data?.[key] !== undefined && kind === "secret"
      ? Buffer.from(obj.data[key], "base64").toString() : obj.data?.[key]);
  const items = src.items || Object.keys({ ...obj.data, ...obj.stringData }).map((k) => ({ key: k, path: k }));
  return Object.fromEntries(items.map((it) => [it.path, { content: value(it.key), mode: it.mode ?? 0o644 }]));
}

function volumeOf(spec, mount) {
  const v = spec.volumes.find((x) => x.name === mount.name);
  const m = { path: mount.mountPath, readOnly: !!mount.readOnly };
  if (v.hostPath) return { ...m, hostPath: v.hostPath.path };
  if (v.projected)
    return { ...m, files: Object.assign({}, ...v.projected.sources.map((s) =>
      s.configMap ? projectSource("configMap", s.configMap) : projectSource("secret", s.secret))) };
  if (v.configMap) return { ...m, files: projectSource("configMap", v.configMap) };
  if (v.secret) return { ...m, files: projectSource("secret", { name: v.secret.secretName, items: v.secret.items }) };
  throw new Error(`volume ${v.name}: kind not reproduced by the test`);
}

const probe = (p) => ({ path: p.httpGet.path, port: named(p.httpGet.port).containerPort });
const client = docs(clientFile).find((o) => o.kind === "Pod").spec;
const cctr = client.containers[0];

const out = {
  command: [...(ctr.command || []), ...(ctr.args || [])],
  env: (ctr.env || []).map((e) => e.valueFrom ? { name: e.name, fieldPath: e.valueFrom.fieldRef.fieldPath } : e),
  runAsUser: ctr.securityContext?.runAsUser ?? pod.securityContext.runAsUser,
  runAsGroup: ctr.securityContext?.runAsGroup ?? pod.securityContext.runAsGroup,
  fsGroup: pod.securityContext.fsGroup,
  initCommands: (pod.initContainers || []).map((c) => [...(c.command || []), ...(c.args || [])]),
  terminationGracePeriodSeconds: pod.terminationGracePeriodSeconds,
  maxUnavailable: ds.spec.updateStrategy.rollingUpdate.maxUnavailable,
  mounts: ctr.volumeMounts.map((m) => volumeOf(pod, m)),
  readiness: probe(ctr.readinessProbe),
  liveness: probe(ctr.livenessProbe),
  client: {
    command: [...(cctr.command || []), ...(cctr.args || [])],
    env: cctr.env || [],
    runAsUser: client.securityContext.runAsUser,
    runAsGroup: client.securityContext.runAsGroup,
    supplementalGroups: client.securityContext.supplementalGroups || [],
    mounts: cctr.volumeMounts.map((m) => volumeOf(client, m)),
  },
};
fs.writeFileSync(outFile, JSON.stringify(out, null, 1));
