// Offline checks of the rendered k8s/ manifests, in two layers:
//  1. every object validates against the Kubernetes OpenAPI schema of its kind (kubernetes-models);
//  2. the fields tokentriage depends on are present with the values it needs, each check named
//     after the field, so a failure says which one is missing or wrong.
// `--self-test` then removes or breaks each of those fields in turn and requires the checks to
// name it: a check that cannot fail is not a check.
//
// usage: node check_manifests.cjs BASE.yaml NODE_CRITICAL.yaml CLIENT_POD.yaml TENANT_DOOR.yaml
//        TENANT.yaml [--self-test]
// (TENANT_DOOR: the base with components/tenant-door; TENANT: k8s/examples/tenant rendered)
// (NODE_PATH must point at a node_modules folder holding kubernetes-models and yaml.)
"use strict";
const fs = require("fs");
const YAML = require("yaml");

// The graceful leave takes ~1 s (SPEC §7); the grace period must outlast it with room for the
// requests in flight. A replica killed before it has left is found by failure detection instead.
const GRACEFUL_LEAVE_S = 5;
const SOCKET_DIR = "/run/tokentriage";
const STATE_DIR = "/var/lib/tokentriage";
const GOSSIP_PORT = 7946;
const RLS_SERVICE = "tokentriage-rls";
const DECIDE_SERVICE = "tokentriage-decide";

function loadDocs(file) {
  return YAML.parseAllDocuments(fs.readFileSync(file, "utf8"))
    .map((d) => d.toJS())
    .filter((o) => o);
}

// kubernetes-models lays its classes out as <group>/<version>/<Kind> ("v1" for the core group).
function schemaErrors(obj) {
  const [group, version] = obj.apiVersion.includes("/")
    ? obj.apiVersion.split("/")
    : [null, obj.apiVersion];
  const mod = `kubernetes-models/${group ? group + "/" : ""}${version}/${obj.kind}`;
  let Model;
  try {
    Model = require(mod)[obj.kind];
  } catch (e) {
    return [`no schema for ${obj.apiVersion} ${obj.kind}`];
  }
  try {
    new Model(obj).validate();
    return [];
  } catch (e) {
    return [e.message];
  }
}

const find = (docs, kind, pred = () => true) => docs.find((o) => o.kind === kind && pred(o));
const get = (o, path) => path.split(".").reduce((v, k) => (v == null ? undefined : v[k]), o);

// Runs every named check over one render; returns [{name, ok, why}].
function checkAll(base, nodeCritical, client, tenantDoor, tenant) {
  const results = [];
  const check = (name, fn) => {
    let why;
    try {
      why = fn();
    } catch (e) {
      why = `threw ${e.message}`;
    }
    results.push({ name, ok: why === true, why: why === true ? "" : why || "missing" });
  };

  for (const [label, docs] of [["base", base], ["node-critical", nodeCritical], ["client", client],
                               ["tenant-door", tenantDoor], ["tenant", tenant]])
    for (const o of docs)
      check(`schema: ${label} ${o.kind}/${get(o, "metadata.name")}`, () => {
        const errs = schemaErrors(o);
        return errs.length === 0 || errs.join("; ");
      });

  const ns = find(base, "Namespace");
  const ds = find(base, "DaemonSet");
  const svc = find(base, "Service", (o) => o.metadata.name === "tokentriage-peers");
  const pod = get(ds, "spec.template.spec") || {};
  const ctr = (pod.containers || []).find((c) => c.name === "tokentriage") || {};
  const env = (name) => (ctr.env || []).find((e) => e.name === name);
  const vol = (name) => (pod.volumes || []).find((v) => v.name === name);
  const mountOf = (c, path) => (c.volumeMounts || []).find((m) => m.mountPath === path);
  const port = (p, proto) =>
    (ctr.ports || []).find((x) => x.containerPort === p && (x.protocol || "TCP") === proto);
  const namedPort = (name) => (ctr.ports || []).find((x) => x.name === name);
  const podSc = pod.securityContext || {};
  const sc = ctr.securityContext || {};

  // The config as deployed: the ConfigMap the config volume names, parsed.
  const argConfig = () => {
    const a = ctr.args || [];
    return a[a.indexOf("-c") + 1];
  };
  const projected = (kind) =>
    (get(vol("config"), "projected.sources") || []).map((s) => s[kind]).filter((x) => x);
  const cm = () => find(base, "ConfigMap", (o) => o.metadata.name === projected("configMap")[0].name);
  const config = () => YAML.parse(cm().data["tokentriage.yaml"]);
  const share = () => get(config(), "shared_state.share");
  function configHttpPort() {
    return Number(String(get(config(), "server.http")).split(":").pop());
  }

  check("Namespace pod-security.kubernetes.io/enforce is privileged (hostPath needs it)", () =>
    get(ns, "metadata.labels")?.["pod-security.kubernetes.io/enforce"] === "privileged");
  check("every object is in the namespace", () => {
    const stray = base.filter((o) => o.kind !== "Namespace" && o.metadata.namespace !== ns.metadata.name);
    return stray.length === 0 || stray.map((o) => `${o.kind}/${o.metadata.name}`).join(", ");
  });

  // The socket directory.
  check("DaemonSet volume hostPath /run/tokentriage type DirectoryOrCreate", () => {
    const hp = (pod.volumes || []).find((v) => get(v, "hostPath.path") === SOCKET_DIR);
    return get(hp, "hostPath.type") === "DirectoryOrCreate" || `hostPath ${JSON.stringify(hp)}`;
  });
  check("daemon container mounts the hostPath at /run/tokentriage", () => {
    const m = mountOf(ctr, SOCKET_DIR);
    return !!m && get(vol(m.name), "hostPath.path") === SOCKET_DIR;
  });

  // The state directory (SPEC §11): on the node, so a replaced pod finds the counters; the
  // daemon's user owns it (fsGroup does not apply to hostPath volumes, so an init container).
  check("DaemonSet volume hostPath /var/lib/tokentriage type DirectoryOrCreate", () => {
    const hp = (pod.volumes || []).find((v) => get(v, "hostPath.path") === STATE_DIR);
    return get(hp, "hostPath.type") === "DirectoryOrCreate" || `hostPath ${JSON.stringify(hp)}`;
  });
  check("daemon container mounts the state hostPath writable at /var/lib/tokentriage", () => {
    const m = mountOf(ctr, STATE_DIR);
    return !!m && !m.readOnly && get(vol(m.name), "hostPath.path") === STATE_DIR;
  });
  check("an init container hands /var/lib/tokentriage to the daemon's user", () =>
    (pod.initContainers || []).some((c) => {
      const cmd = [...(c.command || []), ...(c.args || [])].join(" ");
      const own = `chown ${podSc.runAsUser}:${podSc.runAsGroup} `;
      return !!mountOf(c, STATE_DIR) && cmd.includes(own) &&
        cmd.split("&&").some((part) => part.includes(own) && part.includes(STATE_DIR));
    }));
  check("config server.state_dir is /var/lib/tokentriage", () => get(config(), "server.state_dir") === STATE_DIR);

  // Identity and address from the downward API.
  check("env NODE_NAME from the downward API fieldRef spec.nodeName", () =>
    get(env("NODE_NAME"), "valueFrom.fieldRef.fieldPath") === "spec.nodeName");
  check("env POD_IP from the downward API fieldRef status.podIP", () =>
    get(env("POD_IP"), "valueFrom.fieldRef.fieldPath") === "status.podIP");

  // Ports and probes.
  check("container port 7946/UDP (gossip)", () => !!port(GOSSIP_PORT, "UDP"));
  check("container port 7946/TCP (push-pull)", () => !!port(GOSSIP_PORT, "TCP"));
  const probe = (kind, path) => () => {
    const p = ctr[kind];
    if (get(p, "httpGet.path") !== path) return `${kind}.httpGet.path is ${get(p, "httpGet.path")}`;
    const named = namedPort(p.httpGet.port);
    const num = named ? named.containerPort : p.httpGet.port;
    return num === configHttpPort() || `${kind} port ${num} is not server.http's ${configHttpPort()}`;
  };
  check("livenessProbe httpGet /healthz on server.http's port", probe("livenessProbe", "/healthz"));
  check("readinessProbe httpGet /readyz on server.http's port", probe("readinessProbe", "/readyz"));

  // Rollout and shutdown.
  check("updateStrategy RollingUpdate maxUnavailable 10%", () =>
    get(ds, "spec.updateStrategy.type") === "RollingUpdate" &&
    get(ds, "spec.updateStrategy.rollingUpdate.maxUnavailable") === "10%");
  check(`terminationGracePeriodSeconds > graceful leave (${GRACEFUL_LEAVE_S} s)`, () =>
    pod.terminationGracePeriodSeconds > GRACEFUL_LEAVE_S);
  check("every container has cpu and memory requests and limits", () => {
    const bad = [...(pod.initContainers || []), ...(pod.containers || [])].filter(
      (c) => !["requests", "limits"].every((k) => get(c, `resources.${k}.cpu`) && get(c, `resources.${k}.memory`)));
    return bad.length === 0 || bad.map((c) => c.name).join(", ");
  });

  // Security context of the daemon.
  check("securityContext runAsNonRoot true", () => (sc.runAsNonRoot ?? podSc.runAsNonRoot) === true);
  check("securityContext runAsUser is not 0", () => (sc.runAsUser ?? podSc.runAsUser) > 0);
  check("securityContext readOnlyRootFilesystem true", () => sc.readOnlyRootFilesystem === true);
  check("securityContext allowPrivilegeEscalation false", () => sc.allowPrivilegeEscalation === false);
  check("securityContext capabilities drop ALL, add none", () =>
    (get(sc, "capabilities.drop") || []).includes("ALL") && !get(sc, "capabilities.add"));
  check("securityContext seccompProfile RuntimeDefault", () =>
    (get(sc, "seccompProfile.type") ?? get(podSc, "seccompProfile.type")) === "RuntimeDefault");
  check("init containers drop ALL and add at most CHOWN, FOWNER", () => {
    const bad = (pod.initContainers || []).filter((c) =>
      !(get(c, "securityContext.capabilities.drop") || []).includes("ALL") ||
      (get(c, "securityContext.capabilities.add") || []).some((x) => !["CHOWN", "FOWNER"].includes(x)) ||
      get(c, "securityContext.readOnlyRootFilesystem") !== true);
    return bad.length === 0 || bad.map((c) => c.name).join(", ");
  });
  check("no hostNetwork, hostPID, hostIPC, privileged", () =>
    !pod.hostNetwork && !pod.hostPID && !pod.hostIPC &&
    [...(pod.initContainers || []), ...(pod.containers || [])].every((c) => !get(c, "securityContext.privileged")));
  check("priorityClassName unset in the base (optional component)", () => pod.priorityClassName === undefined);
  check("components/node-critical sets priorityClassName system-node-critical", () =>
    get(find(nodeCritical, "DaemonSet"), "spec.template.spec.priorityClassName") === "system-node-critical");

  // The gossip seed Service.
  check("Service tokentriage-peers is headless (clusterIP None)", () => get(svc, "spec.clusterIP") === "None");
  check("Service tokentriage-peers publishNotReadyAddresses true", () =>
    get(svc, "spec.publishNotReadyAddresses") === true);
  check("Service tokentriage-peers selects the DaemonSet's pods", () => {
    const sel = get(svc, "spec.selector") || {};
    const labels = get(ds, "spec.template.metadata.labels") || {};
    return Object.keys(sel).length > 0 && Object.entries(sel).every(([k, v]) => labels[k] === v);
  });
  check("Service tokentriage-peers ports 7946/UDP and 7946/TCP", () =>
    ["UDP", "TCP"].every((pr) => (get(svc, "spec.ports") || []).some(
      (p) => p.port === GOSSIP_PORT && p.protocol === pr && (namedPort(p.targetPort) || {}).protocol === pr)));

  // Envoy's rate limit service: node-local, on the container port server.grpc listens on.
  const rls = find(base, "Service", (o) => o.metadata.name === RLS_SERVICE);
  check("Service tokentriage-rls internalTrafficPolicy Local (each node's own replica)", () =>
    get(rls, "spec.internalTrafficPolicy") === "Local");
  check("Service tokentriage-rls selects the DaemonSet's pods", () => {
    const sel = get(rls, "spec.selector") || {};
    const labels = get(ds, "spec.template.metadata.labels") || {};
    return Object.keys(sel).length > 0 && Object.entries(sel).every(([k, v]) => labels[k] === v);
  });
  check("Service tokentriage-rls targets the grpc container port, server.grpc's port", () => {
    const p = (get(rls, "spec.ports") || [])[0] || {};
    const target = namedPort(p.targetPort) || {};
    const grpc = String(get(config(), "server.grpc") || "");
    return (target.containerPort === Number(grpc.split(":").pop()) && grpc.startsWith("0.0.0.0:")) ||
      `targetPort ${p.targetPort} (${target.containerPort}) vs server.grpc "${grpc}"`;
  });

  // The config: mounted where the args say, from objects that exist, and wired to the env above.
  check("serve -c names the mounted config file", () => {
    const m = mountOf(ctr, "/etc/tokentriage");
    return !!m && argConfig() === `/etc/tokentriage/${projected("configMap")[0].items[0].path}`;
  });
  check("config volume's ConfigMap exists in the render with tokentriage.yaml", () =>
    typeof cm().data["tokentriage.yaml"] === "string");
  check("config volume's Secret exists in the render with gossip.keys", () => {
    const s = find(base, "Secret", (o) => o.metadata.name === projected("secret")[0].name);
    return !!s && typeof (s.stringData?.["gossip.keys"] ?? s.data?.["gossip.keys"]) === "string";
  });
  check("config keyring_file is the mounted gossip.keys", () =>
    share().keyring_file === `/etc/tokentriage/${projected("secret")[0].items[0].path}`);
  // Who may spend over TCP (SPEC §9): the tokens file, from a Secret, mounted where the config
  // reads it; HTTP decides on TCP only with it.
  const tokensSource = () => projected("secret").find((s) => (s.items || []).some((i) => i.key === "tokens.yaml"));
  check("config volume's Secret exists in the render with tokens.yaml", () => {
    const src = tokensSource();
    const s = src && find(base, "Secret", (o) => o.metadata.name === src.name);
    return !!s && typeof (s.stringData?.["tokens.yaml"] ?? s.data?.["tokens.yaml"]) === "string";
  });
  check("config server.tokens_file is the mounted tokens.yaml", () =>
    get(config(), "server.tokens_file") === `/etc/tokentriage/${tokensSource().items[0].path}`);
  check("config node_id is ${NODE_NAME}", () => share().node_id === "${NODE_NAME}");
  check("config advertise is ${POD_IP}:7946", () => share().advertise === `\${POD_IP}:${GOSSIP_PORT}`);
  check("config bind listens on 7946 on every address", () => share().bind === `0.0.0.0:${GOSSIP_PORT}`);
  check("config seeds name the headless Service", () =>
    (share().seeds || []).includes(`${svc.metadata.name}.${svc.metadata.namespace}.svc.cluster.local:${GOSSIP_PORT}`));
  check("config server.socket is in /run/tokentriage", () =>
    String(get(config(), "server.socket")).startsWith(SOCKET_DIR + "/"));
  check("config server.http listens beyond loopback (probes come from the kubelet)", () =>
    String(get(config(), "server.http")).startsWith("0.0.0.0:"));
  check("config has a share limit", () =>
    (get(config(), "governance.limits") || []).some((l) => l.store === "share"));

  // The tenant door: a node-local Service on the HTTP port, and a client that needs no privilege.
  const decide = find(tenantDoor, "Service", (o) => o.metadata.name === DECIDE_SERVICE);
  check("components/tenant-door Service tokentriage-decide internalTrafficPolicy Local", () =>
    get(decide, "spec.internalTrafficPolicy") === "Local");
  check("components/tenant-door Service targets server.http's port, where decide is on", () => {
    const p = (get(decide, "spec.ports") || [])[0] || {};
    const target = namedPort(p.targetPort) || {};
    return (target.containerPort === configHttpPort() && String(get(config(), "server.http_decide")) === "on") ||
      `targetPort ${p.targetPort} (${target.containerPort}), http_decide ${get(config(), "server.http_decide")}`;
  });
  check("components/tenant-door adds nothing to the DaemonSet", () =>
    JSON.stringify(find(tenantDoor, "DaemonSet")) === JSON.stringify(ds));
  const tns = find(tenant, "Namespace");
  const job = find(tenant, "Job");
  const tspec = get(job, "spec.template.spec") || {};
  const tctr = (tspec.containers || [])[0] || {};
  check("tenant Namespace enforces the restricted Pod Security Standard", () =>
    get(tns, "metadata.labels")?.["pod-security.kubernetes.io/enforce"] === "restricted");
  check("tenant Job has no hostPath, host namespaces or privilege", () =>
    !(tspec.volumes || []).some((v) => v.hostPath) && !tspec.hostNetwork && !tspec.hostPID &&
    !tspec.hostIPC && !get(tctr, "securityContext.privileged"));
  check("tenant Job meets restricted: non-root, RuntimeDefault seccomp, drop ALL, no escalation", () =>
    (get(tctr, "securityContext.runAsNonRoot") ?? get(tspec, "securityContext.runAsNonRoot")) === true &&
    (get(tctr, "securityContext.seccompProfile.type") ?? get(tspec, "securityContext.seccompProfile.type")) === "RuntimeDefault" &&
    (get(tctr, "securityContext.capabilities.drop") || []).includes("ALL") &&
    get(tctr, "securityContext.allowPrivilegeEscalation") === false);
  check("tenant Job sends its Secret's token as a bearer token to tokentriage-decide", () => {
    const env = (tctr.env || []).find((e) => e.name === "TOKEN");
    const secret = find(tenant, "Secret", (o) => o.metadata.name === get(env, "valueFrom.secretKeyRef.name"));
    const cmd = [...(tctr.command || []), ...(tctr.args || [])].join(" ");
    return !!secret && cmd.includes('Authorization: Bearer $TOKEN') &&
      cmd.includes(`${DECIDE_SERVICE}.${get(decide, "metadata.namespace")}.svc.cluster.local:${get(decide, "spec.ports.0.port")}`);
  });

  // The client example.
  const cpod = find(client, "Pod");
  const cspec = get(cpod, "spec") || {};
  const cctr = (cspec.containers || [])[0] || {};
  check("client Pod mounts the hostPath /run/tokentriage readOnly", () => {
    const m = mountOf(cctr, SOCKET_DIR);
    const v = (cspec.volumes || []).find((x) => m && x.name === m.name);
    return !!m && m.readOnly === true && get(v, "hostPath.path") === SOCKET_DIR;
  });
  check("client Pod runs tokentriage decide", () =>
    [...(cctr.command || []), ...(cctr.args || [])].join(" ").startsWith("tokentriage decide"));
  check("client Pod joins the daemon's group (supplementalGroups)", () =>
    (get(cspec, "securityContext.supplementalGroups") || []).includes(podSc.runAsGroup));
  check("client Pod runs as non-root", () => get(cspec, "securityContext.runAsNonRoot") === true);

  return results;
}

// Each mutation breaks one field; the named check (a substring of its name) must fail.
const MUTATIONS = [
  ["enforce is privileged", (b) => delete find(b, "Namespace").metadata.labels["pod-security.kubernetes.io/enforce"]],
  ["hostPath /run/tokentriage type", (b) => (dsSpec(b).volumes.find((v) => v.hostPath).hostPath.type = "Directory")],
  ["mounts the hostPath", (b) => (dsCtr(b).volumeMounts = dsCtr(b).volumeMounts.filter((m) => m.mountPath !== SOCKET_DIR))],
  ["hostPath /var/lib/tokentriage type", (b) => (dsSpec(b).volumes.find((v) => get(v, "hostPath.path") === STATE_DIR).hostPath.type = "Directory")],
  ["mounts the state hostPath", (b) => (dsCtr(b).volumeMounts = dsCtr(b).volumeMounts.filter((m) => m.mountPath !== STATE_DIR))],
  ["hands /var/lib/tokentriage", (b) => (dsSpec(b).initContainers[0].command[2] = "chown 65532:65532 /run/tokentriage && chmod 2750 /run/tokentriage")],
  ["server.state_dir", (b) => setConfig(b, (c) => (c.server.state_dir = ""))],
  ["NODE_NAME", (b) => (dsCtr(b).env = dsCtr(b).env.filter((e) => e.name !== "NODE_NAME"))],
  ["POD_IP", (b) => (dsCtr(b).env.find((e) => e.name === "POD_IP").valueFrom.fieldRef.fieldPath = "status.hostIP")],
  ["7946/UDP (gossip)", (b) => (dsCtr(b).ports = dsCtr(b).ports.filter((p) => p.protocol !== "UDP"))],
  ["livenessProbe", (b) => delete dsCtr(b).livenessProbe],
  ["readinessProbe", (b) => (dsCtr(b).readinessProbe.httpGet.path = "/healthz")],
  ["maxUnavailable 10%", (b) => (find(b, "DaemonSet").spec.updateStrategy.rollingUpdate.maxUnavailable = 1)],
  ["terminationGracePeriodSeconds", (b) => (dsSpec(b).terminationGracePeriodSeconds = 1)],
  ["requests and limits", (b) => delete dsCtr(b).resources.limits],
  ["runAsNonRoot", (b) => delete dsSpec(b).securityContext.runAsNonRoot && delete dsCtr(b).securityContext.runAsNonRoot],
  ["readOnlyRootFilesystem", (b) => delete dsCtr(b).securityContext.readOnlyRootFilesystem],
  ["drop ALL, add none", (b) => (dsCtr(b).securityContext.capabilities.drop = ["NET_RAW"])],
  ["seccompProfile", (b) => delete dsSpec(b).securityContext.seccompProfile],
  ["add at most CHOWN", (b) => dsSpec(b).initContainers[0].securityContext.capabilities.add.push("SYS_ADMIN")],
  ["publishNotReadyAddresses", (b) => delete peers(b).spec.publishNotReadyAddresses],
  ["headless", (b) => (peers(b).spec.clusterIP = "")],
  ["internalTrafficPolicy Local", (b) => (rlsSvc(b).spec.internalTrafficPolicy = "Cluster")],
  ["targets the grpc container port", (b) => (dsCtr(b).ports = dsCtr(b).ports.filter((p) => p.name !== "grpc"))],
  ["server.grpc's port", (b) => setConfig(b, (c) => (c.server.grpc = "127.0.0.1:8081"))],
  ["tokens.yaml", (b) => (dsSpec(b).volumes.find((v) => v.name === "config").projected.sources.pop())],
  ["server.tokens_file", (b) => setConfig(b, (c) => (c.server.tokens_file = "/etc/tokens.yaml"))],
  ["ConfigMap exists", (b) => (b.splice(b.indexOf(find(b, "ConfigMap")), 1))],
  ["node_id", (b) => setConfig(b, (c) => (c.shared_state.share.node_id = "node-1"))],
  ["seeds name", (b) => setConfig(b, (c) => (c.shared_state.share.seeds = ["127.0.0.1:7946"]))],
  ["schema: base DaemonSet", (b) => (dsCtr(b).ports[0].containerPort = "seven")],
];
const MUTATIONS_TENANT_DOOR = [
  ["tokentriage-decide internalTrafficPolicy Local", (t) => (find(t, "Service", (o) => o.metadata.name === DECIDE_SERVICE).spec.internalTrafficPolicy = "Cluster")],
];
const MUTATIONS_TENANT = [
  ["enforces the restricted", (t) => (find(t, "Namespace").metadata.labels["pod-security.kubernetes.io/enforce"] = "baseline")],
  ["no hostPath", (t) => (find(t, "Job").spec.template.spec.volumes = [{ name: "s", hostPath: { path: SOCKET_DIR } }])],
  ["drop ALL", (t) => (find(t, "Job").spec.template.spec.containers[0].securityContext.capabilities.drop = [])],
  ["bearer token", (t) => (find(t, "Job").spec.template.spec.containers[0].env = [])],
];
const MUTATIONS_CLIENT = [
  ["readOnly", (c) => delete find(c, "Pod").spec.containers[0].volumeMounts[0].readOnly],
  ["supplementalGroups", (c) => delete find(c, "Pod").spec.securityContext.supplementalGroups],
];
const peers = (b) => find(b, "Service", (o) => o.metadata.name === "tokentriage-peers");
const rlsSvc = (b) => find(b, "Service", (o) => o.metadata.name === RLS_SERVICE);
const dsSpec = (b) => find(b, "DaemonSet").spec.template.spec;
const dsCtr = (b) => dsSpec(b).containers.find((c) => c.name === "tokentriage");
function setConfig(b, edit) {
  const cm = find(b, "ConfigMap");
  const c = YAML.parse(cm.data["tokentriage.yaml"]);
  edit(c);
  cm.data["tokentriage.yaml"] = YAML.stringify(c);
}

function main() {
  const [baseFile, ncFile, clientFile, doorFile, tenantFile, flag] = process.argv.slice(2);
  const load = () => [loadDocs(baseFile), loadDocs(ncFile), loadDocs(clientFile), loadDocs(doorFile),
                      loadDocs(tenantFile)];
  let failed = 0;
  for (const r of checkAll(...load())) {
    console.log(`${r.ok ? "ok  " : "FAIL"} ${r.name}${r.ok ? "" : ": " + r.why}`);
    failed += !r.ok;
  }
  if (flag === "--self-test") {
    const run = (which, list) => {
      for (const [needle, mutate] of list) {
        const docs = load();
        mutate(docs[which]);
        const caught = checkAll(...docs).filter((r) => !r.ok && r.name.includes(needle));
        console.log(`${caught.length ? "ok  " : "FAIL"} self-test: breaking "${needle}" is reported` +
          (caught.length ? ` (${caught[0].name})` : ""));
        failed += !caught.length;
      }
    };
    run(0, MUTATIONS);
    run(2, MUTATIONS_CLIENT);
    run(3, MUTATIONS_TENANT_DOOR);
    run(4, MUTATIONS_TENANT);
  }
  console.log(failed ? `${failed} check(s) failed` : "all manifest checks passed");
  process.exit(failed ? 1 : 0);
}

main();
