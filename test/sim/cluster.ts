// Public API of the simulated Kubernetes cluster used by kubectl-proxyout's tests: an HTTPS API
// server (apiserver.ts, rest.ts) over an etcd-like store (store.ts), EndpointSlice/Endpoints
// controllers (controllers.ts), and a kubelet stand-in serving WebSocket port-forward
// (kubelet-portforward.ts) to real loopback TCP backends (backends.ts).
// See docs/simulated-cluster.md for what is and is not reproduced.
import { writeFile, chmod } from 'node:fs/promises';
import { randomUUID } from 'node:crypto';
import { isIPv4, isIPv6 } from 'node:net';
import { fileURLToPath } from 'node:url';
import { SimPki, type KeyAndCert } from './pki.js';
import { Store, RESOURCES, type KObject } from './store.js';
import { ApiServer, emptyCounters, type Identity, type SimCounters } from './apiserver.js';
import { KubeletPortForward, type KubeletDeps, type KubeletErrorFormat } from './kubelet-portforward.js';
import { KubeletSpdyPortForward, type SpdyFailureFrames } from './kubelet-spdy.js';
import type { Headers } from '../../src/tunnel/spdy/framer.js';
import { EndpointsController, MANAGED_BY_LABEL, SERVICE_NAME_LABEL, randomSuffix } from './controllers.js';
import { PodBackends, type BackendKind } from './backends.js';
import { NODE_IP, namespaceObject, nowRfc3339, podObject, podStatus, randomHex, serviceObject, unscheduledStatus } from './objects.js';
import { renderKubeconfig, type KubeconfigAuth } from './kubeconfig.js';
import { notFound } from './status.js';
import { SimIngressController, ingressObject, routeObject, type SimIngressSpec, type SimRouteSpec } from './ingress.js';

export type { SimCounters } from './apiserver.js';
export type { BackendKind } from './backends.js';
export type { SimIngressSpec, SimRouteSpec } from './ingress.js';
export { DEFAULT_CERT_CN } from './ingress.js';
export { deterministicBytes, deterministicSha256, DeterministicByteStream } from './backends.js';

export interface SimOptions {
  host?: string; // 127.0.0.1
  port?: number; // 0
  clusterDomain?: string; // cluster.local
  quiet?: boolean;
  /** Extension: how long the runtime waits for the other direction after one ends (containerd: 1000 ms). */
  closeGraceMs?: number;
  /** Extension: keep deleted pods Terminating this long (endpoints terminating) before removal. Default 0. */
  terminatingMs?: number;
  /** Extension: create default/kube-system/kube-public/kube-node-lease and default/kubernetes. Default true. */
  bootstrap?: boolean;
  /** Extension: events kept for watch resumption (older → 410). Default 10000. */
  maxHistory?: number;
  /** Extension: serve SPDY tunnelled in a WebSocket (Kubernetes ≥ 1.31). false = a 1.29-like server. Default true. */
  spdyTunnel?: boolean;
  /** Extension: the kubelet's stream creation timeout for unpaired SPDY streams. Default 30000. */
  streamCreationTimeoutMs?: number;
  /**
   * Extension: end a pod's SPDY sessions when it is deleted. A real kubelet does not: the
   * session stays bound to the gone sandbox and answers new streams "failed to find sandbox".
   * Default false.
   */
  closeSpdySessionsWithPod?: boolean;
  /** Extension: first Pod IP to hand out (default 127.10.0.2): two clusters in one test can differ. */
  podIpStart?: string;
  /** Extension: first ClusterIP to hand out (default 127.96.0.10). */
  clusterIpStart?: string;
  /** Extension: the EndpointSlice (and Endpoints) controllers run this long after a change, not in the same instant (upstream: ~10 ms). Default 0. */
  endpointSliceDelayMs?: number;
  /** Extension: serve OpenShift Routes (route.openshift.io/v1) like an OpenShift API server. Default false. */
  openshiftRoutes?: boolean;
  /** Requests without credentials are system:anonymous (403 but for /version and health), as kube-apiserver's default; false: 401. Default true. */
  anonymousAuth?: boolean;
  /**
   * Extension: backends never listen on the pod IP, only on 127.0.0.1:<ephemeral>, so Pod IPs
   * answer only through the kubelet or a konnectivity server (a guest cluster; guest-network.ts).
   * Their IPs come from 127.12.0.2 on (no simulator binds there). Default false.
   */
  isolatePodIps?: boolean;
}

export interface SimContainerPort {
  name?: string;
  containerPort: number;
  protocol?: 'TCP';
}

export interface SimPodSpec {
  namespace: string;
  name: string;
  labels?: Record<string, string>;
  ip?: string;
  /**
   * Extension: a dual-stack pod's second address (status.podIPs[1]), data only: the Services of
   * family IPv6 list it in their IPv6 EndpointSlices; the kubelet and the backends never use it.
   */
  ipv6?: string;
  hostname?: string;
  subdomain?: string;
  ready?: boolean;
  phase?: 'Running' | 'Pending';
  /** false: no node takes the pod (Pending, no spec.nodeName, PodScheduled False); port-forward to it is refused 400. Default true. */
  scheduled?: boolean;
  /** Extension: a hostNetwork pod; its IP is the node's (NODE_IP, 127.0.0.1), its backends listen there. */
  hostNetwork?: boolean;
  ports: Array<SimContainerPort & { backend?: BackendKind; target?: { host: string; port: number } }>;
}

export interface SimServiceSpec {
  namespace: string;
  name: string;
  selector?: Record<string, string>;
  ports: Array<{ name?: string; port: number; targetPort?: number | string; protocol?: 'TCP' }>;
  type?: 'ClusterIP' | 'ExternalName' | 'NodePort';
  headless?: boolean;
  clusterIP?: string;
  ipv6ClusterIP?: string;
  externalName?: string;
  /** Every endpoint ready, whatever its pod's state (peers that find each other by DNS). */
  publishNotReadyAddresses?: boolean;
}

export interface KubeconfigOptions {
  context?: string;
  namespace?: string;
  token?: string;
  auth?: 'token' | 'cert' | 'exec';
  insecureSkipTlsVerify?: boolean;
  server?: string;
}

interface PodRuntime {
  namespace: string;
  name: string;
  uid: string;
  ip: string;
  sandboxId: string;
  netnsPath: string;
  running: boolean;
  scheduled: boolean;
  backends?: PodBackends;
  refused: Set<number>;
}

const EXEC_SCRIPT = fileURLToPath(new URL('./exec-credential.js', import.meta.url));

function ipv4ToInt(ip: string): number {
  return ip.split('.').reduce((n, o) => n * 256 + Number(o), 0);
}
function intToIpv4(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
}

export class SimCluster {
  readonly caPem: string;
  readonly adminToken: string;
  readonly clusterDomain: string;
  private readonly host: string;
  private readonly store: Store;
  private readonly pki: SimPki;
  private readonly api: ApiServer;
  private readonly kubelet: KubeletPortForward;
  private readonly spdyKubelet: KubeletSpdyPortForward;
  private spdyReplyHeaders: Headers = {};
  private spdyFailureFrames: SpdyFailureFrames = 'containerd';
  private kubeletErrorFormat: KubeletErrorFormat = 'text';
  private readonly closeSpdySessionsWithPod: boolean;
  private readonly isolatePodIps: boolean;
  private readonly controller: EndpointsController;
  private readonly tokens = new Map<string, Identity>();
  private readonly pods = new Map<string, PodRuntime>();
  private readonly usedClusterIPs = new Set<string>();
  private nextPodIp: number;
  private nextClusterIp = ipv4ToInt('127.96.0.10');
  private nextNodePort = 30000;
  private tokenCount = 0;
  private certCache?: KeyAndCert;
  /** The runtime's wait for the other direction after one ends (SimOptions); tests and benches may change it. */
  closeGraceMs: number;
  private readonly terminatingMs: number;
  private readonly log: (msg: string) => void;
  private readonly ingressController: SimIngressController;

  /** Extension: how long after a change the EndpointSlice controllers run (SimOptions.endpointSliceDelayMs). */
  endpointSliceDelayMs: number;
  private stopped = false;

  private constructor(opts: SimOptions) {
    this.host = opts.host ?? '127.0.0.1';
    this.clusterDomain = opts.clusterDomain ?? 'cluster.local';
    this.closeGraceMs = opts.closeGraceMs ?? 1000;
    if (opts.clusterIpStart) this.nextClusterIp = ipv4ToInt(opts.clusterIpStart);
    this.terminatingMs = opts.terminatingMs ?? 0;
    this.endpointSliceDelayMs = opts.endpointSliceDelayMs ?? 0;
    this.log = opts.quiet ? () => {} : (m) => process.stderr.write(`[sim] ${m}\n`);
    this.pki = new SimPki();
    this.caPem = this.pki.caPem;
    this.store = new Store(opts.maxHistory ?? 10_000);
    this.controller = new EndpointsController(this.store);
    this.adminToken = `sim-admin-${randomHex(16)}`;
    this.tokens.set(this.adminToken, { user: 'sim-admin', groups: ['system:masters', 'system:authenticated'] });
    const kubeletDeps: KubeletDeps = {
      lookupPod: (ns, name) => {
        const pod = this.store.get('pods', ns, name);
        if (!pod) return undefined;
        const rt = this.pods.get(`${ns}/${name}`);
        return rt
          ? { namespace: ns, name, uid: rt.uid, sandboxId: rt.sandboxId, netnsPath: rt.netnsPath, running: rt.running, scheduled: rt.scheduled }
          : { namespace: ns, name, uid: pod.metadata.uid ?? '', sandboxId: '', netnsPath: '', running: false, scheduled: true };
      },
      dialTarget: (ns, name, port) => {
        const rt = this.pods.get(`${ns}/${name}`);
        if (!rt || rt.refused.has(port)) return 'refused';
        return rt.backends?.target(port) ?? 'refused';
      },
      closeGraceMs: () => this.closeGraceMs,
      notFound: (name) => notFound(RESOURCES.pods, name),
      sandboxAlive: (sandboxId) => [...this.pods.values()].some((rt) => rt.sandboxId === sandboxId),
      errorFormat: () => this.kubeletErrorFormat,
    };
    this.kubelet = new KubeletPortForward(kubeletDeps);
    this.spdyKubelet = new KubeletSpdyPortForward({
      ...kubeletDeps,
      streamCreationTimeoutMs: () => opts.streamCreationTimeoutMs ?? 30_000,
      replyHeaders: () => this.spdyReplyHeaders,
      failureFrames: () => this.spdyFailureFrames,
    });
    this.closeSpdySessionsWithPod = opts.closeSpdySessionsWithPod ?? false;
    this.isolatePodIps = opts.isolatePodIps ?? false;
    // Isolated pods take their IPs from a block no simulator binds, so that nothing (another
    // simulator's pods in a parallel test process included) answers there directly.
    this.nextPodIp = ipv4ToInt(opts.podIpStart ?? (this.isolatePodIps ? '127.12.0.2' : '127.10.0.2'));
    this.spdyKubelet.tunnel = opts.spdyTunnel ?? true;
    this.ingressController = new SimIngressController(this.store, this.pki, () => this.api.openshiftRoutes);
    const serving = this.pki.servingCert(this.host);
    this.api = new ApiServer({
      host: this.host,
      port: opts.port ?? 0,
      tls: { key: serving.keyPem, cert: serving.certPem, ca: this.caPem },
      store: this.store,
      tokens: this.tokens,
      onPortForward: (req, socket, head, ns, pod, query) => this.kubelet.handle(req, socket, head, ns, pod, query),
      onSpdyPortForward: (req, socket, head, ns, pod, query) => this.spdyKubelet.handle(req, socket, head, ns, pod, query),
      log: this.log,
    });
    this.api.openshiftRoutes = opts.openshiftRoutes ?? false;
    this.api.anonymousAuth = opts.anonymousAuth ?? true;
  }

  static async start(opts: SimOptions = {}): Promise<SimCluster> {
    const sim = new SimCluster(opts);
    await sim.api.listen();
    if (opts.bootstrap !== false) await sim.bootstrap();
    sim.log(`API server listening at ${sim.server}`);
    return sim;
  }

  private async bootstrap(): Promise<void> {
    for (const ns of ['default', 'kube-system', 'kube-public', 'kube-node-lease']) await this.createNamespace(ns);
    // The `kubernetes` service: selector-less, its endpoints are the API server itself.
    await this.createService({
      namespace: 'default',
      name: 'kubernetes',
      clusterIP: '127.96.0.1',
      ports: [{ name: 'https', port: 443, targetPort: this.api.port }],
    });
    this.store.update('services', 'default', 'kubernetes', (o) => {
      o.metadata.labels = { component: 'apiserver', provider: 'kubernetes' };
    });
    this.store.create('endpoints', {
      apiVersion: 'v1',
      kind: 'Endpoints',
      metadata: { name: 'kubernetes', namespace: 'default', labels: { 'endpointslice.kubernetes.io/skip-mirror': 'true' } },
      subsets: [{ addresses: [{ ip: '127.0.0.1' }], ports: [{ name: 'https', port: this.api.port, protocol: 'TCP' }] }],
    });
    this.store.create('endpointslices', {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name: 'kubernetes', namespace: 'default', labels: { [SERVICE_NAME_LABEL]: 'kubernetes' } },
      addressType: 'IPv4',
      endpoints: [{ addresses: ['127.0.0.1'], conditions: { ready: true } }],
      ports: [{ name: 'https', port: this.api.port, protocol: 'TCP' }],
    });
  }

  get server(): string {
    const h = this.host.includes(':') ? `[${this.host}]` : this.host;
    return `https://${h}:${this.api.port}`;
  }

  get counters(): SimCounters {
    const c = this.api.counters;
    return { ...c, byPath: { ...c.byPath }, bytesByPath: { ...c.bytesByPath } };
  }

  /**
   * Extension: the next `count` requests whose path and query match `match` are refused as API
   * priority and fairness refuses a flow over its share: 429, plain text, Retry-After.
   */
  tooManyRequests(count: number, match: RegExp, retryAfterSeconds = 1): void {
    this.api.tooManyRequests = { count, match, retryAfterSeconds };
  }

  /** Extension: with false, a server without the WatchList feature: sendInitialEvents is refused (422). */
  setWatchList(enabled: boolean): void {
    this.api.watchList = enabled;
  }

  /** Extension: called after every list page that has a continue token (e.g. to compact mid-list). */
  onListPage(fn: ((resource: string) => void) | undefined): void {
    this.api.afterListPage = fn;
  }

  /**
   * Extension: store many objects at once (Store.bulkLoad: no events, older resourceVersions
   * compacted). Objects are taken as they are and may share nested parts; no controllers run and
   * no pod gets backends, so they are for listing and watching, not for dialling.
   */
  bulkLoad(resource: 'pods' | 'services' | 'endpointslices' | 'namespaces', objects: KObject[]): void {
    this.store.bulkLoad(resource, objects);
  }

  resetCounters(): void {
    this.api.counters = emptyCounters();
  }

  /** Extension: port-forward WebSocket sessions currently open. */
  get openPortForwards(): number {
    return this.kubelet.openSessions;
  }

  /** Extension: SPDY port-forward sessions (tunnelled or plain) currently open. */
  get openSpdySessions(): number {
    return this.spdyKubelet.openSessions;
  }

  /** Extension: SPDY port-forward sessions to one pod currently open. */
  spdySessionsOf(namespace: string, name: string): number {
    return this.spdyKubelet.sessionsOf(namespace, name);
  }

  /** Extension: SPDY stream pairs open (or waiting for their partner) in all sessions. */
  get openSpdyStreamPairs(): number {
    return this.spdyKubelet.openPairs;
  }

  /** Extension: the frames a failed SPDY stream pair ends with (kubelet-spdy.ts SpdyFailureFrames). */
  setSpdyFailureFrames(frames: SpdyFailureFrames): void {
    this.spdyFailureFrames = frames;
  }

  /**
   * Extension: the largest message the SPDY-over-WebSocket tunnel sends (default 16 KiB, one TLS
   * record per read of the kubelet's connection). A few bytes cut every frame, error texts
   * included, into pieces.
   */
  setTunnelMessageMax(bytes: number): void {
    this.spdyKubelet.tunnelMessageMax = bytes;
  }

  /** Extension: plain-text errors (default) or newer kubelets' JSON `{closeConnection, message}`, on both protocols. */
  setKubeletErrorFormat(format: KubeletErrorFormat): void {
    this.kubeletErrorFormat = format;
  }

  /** Extension: GOAWAY frames the simulated kubelet received from SPDY clients. */
  get spdyGoAways(): number {
    return this.spdyKubelet.goAways;
  }

  /**
   * Extension: headers the simulated kubelet puts in every SYN_REPLY (the real one sends none).
   * Real kubectl then has to decode our header-block compression (src/tunnel/spdy/header-block.ts)
   * with Go's zlib, block after block of one session — what a real kubelet does with our SYN_STREAMs.
   */
  setSpdyReplyHeaders(headers: Headers): void {
    this.spdyReplyHeaders = headers;
  }

  /** Extension: turn the SPDY-over-WebSocket tunnel on or off (off = a Kubernetes 1.29-like server). */
  setSpdyTunnel(enabled: boolean): void {
    this.spdyKubelet.tunnel = enabled;
  }

  /** Extension: cut the connections of SPDY sessions (all, or one namespace/pod's) like a broken network. */
  killSpdySessions(namespace?: string, name?: string): number {
    return this.spdyKubelet.killSessions(namespace, name);
  }

  /**
   * Extension: the kubelet ends SPDY sessions as spdystream does (GOAWAY, later SYN_STREAMs dropped
   * without a word, open streams carry on, the connection closes when they are done) — now, or with
   * `atNextStream` right before each session's next SYN_STREAM arrives (a client stream that crosses
   * the GOAWAY on the wire). Returns how many sessions.
   */
  goAwaySpdySessions(namespace?: string, name?: string, options: { atNextStream?: boolean } = {}): number {
    return this.spdyKubelet.goAwaySessions(namespace, name, options.atNextStream ?? false);
  }

  /** Extension: SPDY sessions flood their client with PINGs and stop reading its echoes (a broken or hostile server). */
  floodSpdyPings(namespace?: string, name?: string): number {
    return this.spdyKubelet.floodPings(namespace, name);
  }

  /** Extension: SPDY sessions stop reading and answering, their connections left open (a silently dead path). */
  freezeSpdySessions(namespace?: string, name?: string): number {
    return this.spdyKubelet.freezeSessions(namespace, name);
  }

  /** Extension: current global resourceVersion. */
  get resourceVersion(): string {
    return String(this.store.revision);
  }

  /** A bearer token; `namespaces` scopes it (stand-in RBAC), `denied` refuses "verb resource" pairs anywhere. */
  issueToken(opts: { namespaces?: string[]; token?: string; denied?: string[] } = {}): string {
    const n = ++this.tokenCount;
    const token = opts.token ?? `sim-${randomHex(20)}`;
    const ns = opts.namespaces ? [...opts.namespaces] : undefined;
    const user = ns ? `system:serviceaccount:${ns[0] ?? 'default'}:proxyout-${n}` : `sim-user-${n}`;
    this.tokens.set(token, { user, groups: ['system:authenticated'], namespaces: ns, ...(opts.denied ? { denied: [...opts.denied] } : {}) });
    return token;
  }

  /**
   * Extension: the namespaces a scoped token may read from now on (a RoleBinding granted, or gone
   * with its namespace). Watches already open go on until they end, as the API server's do.
   */
  scopeToken(token: string, namespaces: string[]): void {
    const id = this.tokens.get(token);
    if (!id?.namespaces) throw new Error('scopeToken: not a scoped token');
    id.namespaces = [...namespaces];
  }

  /** Extension: the token is refused from now on (401), as a revoked or expired one is. */
  revokeToken(token: string): void {
    this.tokens.delete(token);
  }

  issueClientCert(user: string): { certPem: string; keyPem: string } {
    return this.pki.clientCert(user);
  }

  kubeconfigYaml(opts: KubeconfigOptions = {}): string {
    const mode = opts.auth ?? 'token';
    const token = opts.token ?? this.adminToken;
    let auth: KubeconfigAuth;
    if (mode === 'cert') {
      this.certCache ??= this.pki.clientCert('sim-cert-admin');
      auth = { kind: 'cert', ...this.certCache };
    } else if (mode === 'exec') {
      auth = { kind: 'exec', command: process.execPath, args: [EXEC_SCRIPT], env: { SIM_EXEC_TOKEN: token } };
    } else {
      auth = { kind: 'token', token };
    }
    return renderKubeconfig({
      server: opts.server ?? this.server,
      caPem: this.caPem,
      insecureSkipTlsVerify: opts.insecureSkipTlsVerify,
      context: opts.context ?? 'sim',
      namespace: opts.namespace,
      auth,
    });
  }

  async writeKubeconfig(file: string, opts: KubeconfigOptions = {}): Promise<void> {
    await writeFile(file, this.kubeconfigYaml(opts), { mode: 0o600 });
    await chmod(file, 0o600);
  }

  /** Idempotent (like `kubectl create ns --dry-run | apply`): an existing namespace is kept. */
  async createNamespace(name: string): Promise<void> {
    if (this.store.has('namespaces', undefined, name)) return;
    this.store.create('namespaces', namespaceObject(name));
  }

  /** Marks the namespace Terminating, deletes everything in it (pods first), then the namespace. */
  async deleteNamespace(name: string): Promise<void> {
    if (!this.store.has('namespaces', undefined, name)) throw new Error(`namespaces "${name}" not found`);
    this.store.update('namespaces', undefined, name, (o: any) => {
      o.metadata.deletionTimestamp = nowRfc3339();
      o.status = { phase: 'Terminating' };
    });
    for (const p of this.store.list('pods', name)) await this.removePodNow(name, p.metadata.name);
    for (const s of this.store.list('services', name)) this.store.remove('services', name, s.metadata.name);
    for (const s of this.store.list('endpointslices', name)) this.store.remove('endpointslices', name, s.metadata.name);
    for (const e of this.store.list('endpoints', name)) this.store.remove('endpoints', name, e.metadata.name);
    for (const r of ['ingresses', 'routes'] as const) for (const o of this.store.list(r, name)) this.store.remove(r, name, o.metadata.name);
    this.store.remove('namespaces', undefined, name);
  }

  private allocatePodIp(): string {
    const used = new Set([...this.pods.values()].map((p) => p.ip));
    let ip = intToIpv4(this.nextPodIp++);
    while (used.has(ip) || ip.endsWith('.0') || ip.endsWith('.255')) ip = intToIpv4(this.nextPodIp++);
    return ip;
  }

  async createPod(spec: SimPodSpec): Promise<{ ip: string; uid: string }> {
    const key = `${spec.namespace}/${spec.name}`;
    if (this.store.has('pods', spec.namespace, spec.name)) throw new Error(`pods "${spec.name}" already exists`);
    await this.createNamespace(spec.namespace);
    const ip = spec.ip ?? (spec.hostNetwork ? NODE_IP : this.allocatePodIp());
    const scheduled = spec.scheduled ?? true;
    const phase = scheduled ? (spec.phase ?? 'Running') : 'Pending';
    const uid = randomUUID();
    const rt: PodRuntime = {
      namespace: spec.namespace,
      name: spec.name,
      uid,
      ip,
      sandboxId: randomHex(32),
      netnsPath: `/var/run/netns/cni-${randomUUID()}`,
      running: phase === 'Running',
      scheduled,
      refused: new Set(),
    };
    if (rt.running)
      rt.backends = await PodBackends.start({ namespace: spec.namespace, name: spec.name, ip }, spec.ports, this.ingressController, !this.isolatePodIps);
    this.pods.set(key, rt);
    const obj = podObject({
      namespace: spec.namespace,
      name: spec.name,
      labels: spec.labels,
      hostname: spec.hostname,
      subdomain: spec.subdomain,
      hostNetwork: spec.hostNetwork,
      ports: spec.ports,
    });
    obj.metadata.uid = uid;
    obj.status = scheduled ? podStatus(phase, spec.ready ?? true, ip, nowRfc3339(), randomHex(32), spec.ipv6) : unscheduledStatus(nowRfc3339());
    if (!scheduled) delete (obj.spec as { nodeName?: string }).nodeName;
    this.store.create('pods', obj);
    this.reconcile(() => this.controller.syncNamespace(spec.namespace));
    return { ip, uid };
  }

  private async removePodNow(namespace: string, name: string): Promise<void> {
    const key = `${namespace}/${name}`;
    const rt = this.pods.get(key);
    this.pods.delete(key);
    this.kubelet.closePod(namespace, name);
    if (this.closeSpdySessionsWithPod) this.spdyKubelet.closePod(namespace, name);
    await rt?.backends?.stop();
    this.store.remove('pods', namespace, name);
    this.reconcile(() => this.controller.syncNamespace(namespace));
  }

  /**
   * With `terminatingMs`, the pod stays Terminating that long. Its containers stop at once (an app
   * that exits on SIGTERM: not ready, endpoints `serving: false`), or after `stopDelayMs` (a preStop
   * sleep: meanwhile it stays Ready and answers, its endpoints `ready: false, serving: true,
   * terminating: true`, as upstream's EndpointSlice controller writes them for a Ready pod being deleted).
   */
  async deletePod(namespace: string, name: string, opts: { stopDelayMs?: number } = {}): Promise<void> {
    if (!this.store.has('pods', namespace, name)) throw new Error(`pods "${name}" not found`);
    if (this.terminatingMs <= 0) return this.removePodNow(namespace, name);
    this.store.update('pods', namespace, name, (o: any) => {
      o.metadata.deletionTimestamp = nowRfc3339();
      o.metadata.deletionGracePeriodSeconds = 30;
    });
    const stopDelayMs = Math.min(opts.stopDelayMs ?? 0, this.terminatingMs);
    if (stopDelayMs > 0) {
      this.reconcile(() => this.controller.syncNamespace(namespace));
      setTimeout(() => void this.stopContainers(namespace, name), stopDelayMs).unref();
    } else {
      await this.stopContainers(namespace, name);
    }
    setTimeout(() => {
      if (this.store.has('pods', namespace, name)) void this.removePodNow(namespace, name);
    }, this.terminatingMs).unref();
  }

  /** A terminating pod's containers exit: its servers and port-forwards close, it turns not ready. */
  private async stopContainers(namespace: string, name: string): Promise<void> {
    const rt = this.pods.get(`${namespace}/${name}`);
    if (!rt || !this.store.has('pods', namespace, name)) return;
    this.kubelet.closePod(namespace, name);
    if (this.closeSpdySessionsWithPod) this.spdyKubelet.closePod(namespace, name);
    await rt.backends?.stop();
    rt.running = false;
    this.store.update('pods', namespace, name, (o: any) => {
      for (const c of o.status.conditions ?? []) if (c.type === 'Ready' || c.type === 'ContainersReady') c.status = 'False';
      for (const s of o.status.containerStatuses ?? []) s.ready = false;
    });
    this.reconcile(() => this.controller.syncNamespace(namespace));
  }

  /** Extension: the pod's containers exit (a finished Job pod): phase Succeeded or Failed, backends gone, not ready. */
  async completePod(namespace: string, name: string, phase: 'Succeeded' | 'Failed' = 'Succeeded'): Promise<void> {
    const rt = this.pods.get(`${namespace}/${name}`);
    if (!rt) throw new Error(`pods "${name}" not found`);
    this.kubelet.closePod(namespace, name);
    this.spdyKubelet.closePod(namespace, name);
    await rt.backends?.stop();
    rt.running = false;
    this.store.update('pods', namespace, name, (o: any) => {
      o.status.phase = phase;
      for (const c of o.status.conditions ?? []) if (c.type === 'Ready' || c.type === 'ContainersReady') c.status = 'False';
      for (const s of o.status.containerStatuses ?? []) s.ready = false;
    });
    this.reconcile(() => this.controller.syncNamespace(namespace));
  }

  async setPodReady(namespace: string, name: string, ready: boolean): Promise<void> {
    const at = nowRfc3339();
    const updated = this.store.update('pods', namespace, name, (o: any) => {
      for (const c of o.status.conditions ?? []) {
        if ((c.type === 'Ready' || c.type === 'ContainersReady') && (c.status === 'True') !== ready) {
          c.status = ready ? 'True' : 'False';
          c.lastTransitionTime = at;
          if (ready) {
            delete c.reason;
            delete c.message;
          } else {
            c.reason = 'ContainersNotReady';
            c.message = 'containers with unready status: [app]';
          }
        }
      }
      for (const s of o.status.containerStatuses ?? []) s.ready = ready;
    });
    if (!updated) throw new Error(`pods "${name}" not found`);
    this.reconcile(() => this.controller.syncNamespace(namespace));
  }

  refusePort(namespace: string, name: string, port: number, refuse = true): void {
    const rt = this.pods.get(`${namespace}/${name}`);
    if (!rt) throw new Error(`pods "${name}" not found`);
    if (refuse) rt.refused.add(port);
    else rt.refused.delete(port);
  }

  /** Extension: port-forward requests get no answer, all else is served (a kubelet that hangs behind the API server). */
  stallPortForwards(on: boolean): void {
    this.api.stallPortForwards = on;
  }

  /** Extension: RST every open backend connection of a pod (a crash); returns how many were reset. */
  resetPodConnections(namespace: string, name: string): number {
    const rt = this.pods.get(`${namespace}/${name}`);
    if (!rt) throw new Error(`pods "${name}" not found`);
    return rt.backends?.resetConnections() ?? 0;
  }

  private allocateClusterIp(): string {
    let ip = intToIpv4(this.nextClusterIp++);
    while (this.usedClusterIPs.has(ip)) ip = intToIpv4(this.nextClusterIp++);
    return ip;
  }

  async createService(spec: SimServiceSpec): Promise<{ clusterIP: string | 'None' }> {
    if (this.store.has('services', spec.namespace, spec.name)) throw new Error(`services "${spec.name}" already exists`);
    await this.createNamespace(spec.namespace);
    const type = spec.type ?? 'ClusterIP';
    let clusterIP: string | undefined;
    if (type !== 'ExternalName') {
      if (spec.headless) clusterIP = 'None';
      else if (spec.clusterIP) {
        if (!isIPv4(spec.clusterIP) && spec.clusterIP !== 'None') throw new Error(`clusterIP ${spec.clusterIP} is not an IPv4 address`);
        if (this.usedClusterIPs.has(spec.clusterIP)) throw new Error(`provided IP is already allocated: ${spec.clusterIP}`);
        clusterIP = spec.clusterIP;
      } else clusterIP = this.allocateClusterIp();
      if (clusterIP !== 'None') this.usedClusterIPs.add(clusterIP);
    }
    if (spec.ipv6ClusterIP !== undefined && !isIPv6(spec.ipv6ClusterIP)) throw new Error(`ipv6ClusterIP ${spec.ipv6ClusterIP} is not an IPv6 address`);
    const ports = spec.ports.map((p) => ({ ...p, nodePort: type === 'NodePort' ? this.nextNodePort++ : undefined }));
    this.store.create(
      'services',
      serviceObject({
        namespace: spec.namespace,
        name: spec.name,
        selector: spec.selector,
        ports,
        type,
        clusterIP,
        ipv6ClusterIP: clusterIP && clusterIP !== 'None' ? spec.ipv6ClusterIP : undefined,
        externalName: spec.externalName,
        publishNotReadyAddresses: spec.publishNotReadyAddresses,
      }),
    );
    this.reconcile(() => this.controller.syncService(spec.namespace, spec.name));
    return { clusterIP: clusterIP ?? '' };
  }

  async deleteService(namespace: string, name: string): Promise<void> {
    const gone = this.store.remove('services', namespace, name) as any;
    if (!gone) throw new Error(`services "${name}" not found`);
    if (gone.spec?.clusterIP && gone.spec.clusterIP !== 'None') this.usedClusterIPs.delete(gone.spec.clusterIP);
    this.reconcile(() => this.controller.syncService(namespace, name));
  }

  /** A hand-made slice for a selector-less service: no targetRef, conditions {ready: true} only. */
  async createEndpointSlice(namespace: string, serviceName: string, addresses: string[], port: number): Promise<void> {
    await this.createNamespace(namespace);
    const svc = this.store.get('services', namespace, serviceName) as any;
    const svcPorts: any[] = svc?.spec?.ports ?? [];
    const match = svcPorts.find((p) => p.targetPort === port || p.port === port) ?? svcPorts[0];
    const addressType = addresses.every(isIPv4) ? 'IPv4' : addresses.every((a) => a.includes(':')) ? 'IPv6' : 'FQDN';
    let name = `${serviceName}-${randomSuffix()}`;
    while (this.store.has('endpointslices', namespace, name)) name = `${serviceName}-${randomSuffix()}`;
    const slice: KObject = {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name, namespace, labels: { [SERVICE_NAME_LABEL]: serviceName, [MANAGED_BY_LABEL]: 'sim-manual' } },
      addressType,
      endpoints: addresses.map((a) => ({ addresses: [a], conditions: { ready: true } })),
      ports: [{ name: match?.name ?? '', port, protocol: 'TCP' }],
    };
    this.store.create('endpointslices', slice);
  }

  /** Extension: an Ingress (networking.k8s.io/v1); the simulated ingress controller serves it at once. */
  async createIngress(spec: SimIngressSpec): Promise<void> {
    await this.createNamespace(spec.namespace);
    this.store.create('ingresses', ingressObject(spec, NODE_IP));
  }

  /** Extension: replaces an Ingress's spec (one MODIFIED event). */
  updateIngress(spec: SimIngressSpec): void {
    const next = ingressObject(spec, NODE_IP);
    const done = this.store.update('ingresses', spec.namespace, spec.name, (o) => {
      o.spec = next.spec;
      o.metadata.annotations = next.metadata.annotations;
      o.metadata.generation = Number(o.metadata.generation ?? 1) + 1;
    });
    if (!done) throw new Error(`ingresses.networking.k8s.io "${spec.name}" not found`);
  }

  deleteIngress(namespace: string, name: string): void {
    if (!this.store.remove('ingresses', namespace, name)) throw new Error(`ingresses.networking.k8s.io "${name}" not found`);
  }

  /**
   * An IngressClass (networking.k8s.io/v1, cluster-scoped): `controller` is its spec.controller,
   * `isDefault` sets the ingressclass.kubernetes.io/is-default-class annotation.
   */
  createIngressClass(name: string, controller: string, isDefault = false): void {
    const annotations = isDefault ? { 'ingressclass.kubernetes.io/is-default-class': 'true' } : undefined;
    this.store.create('ingressclasses', {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'IngressClass',
      metadata: { name, ...(annotations ? { annotations } : {}) },
      spec: { controller },
    });
  }

  deleteIngressClass(name: string): void {
    if (!this.store.remove('ingressclasses', undefined, name)) throw new Error(`ingressclasses.networking.k8s.io "${name}" not found`);
  }

  /** Extension: an OpenShift Route (served by the API only with openshiftRoutes on; stored either way). */
  async createRoute(spec: SimRouteSpec): Promise<void> {
    await this.createNamespace(spec.namespace);
    this.store.create('routes', routeObject(spec));
  }

  deleteRoute(namespace: string, name: string): void {
    if (!this.store.remove('routes', namespace, name)) throw new Error(`routes.route.openshift.io "${name}" not found`);
  }

  /** Extension: serve route.openshift.io/v1 (discovery, list, watch) or answer 404 like a plain Kubernetes API server. */
  setOpenShiftRoutes(on: boolean): void {
    this.api.openshiftRoutes = on;
  }

  /** Extension: the rule the simulated ingress controller picks for a Host and path (undefined = its 404). */
  ingressMatch(host: string, path = '/'): { via: string; namespace: string; service: string; port: string } | undefined {
    return this.ingressController.match(host, path);
  }

  dropWatches(): void {
    this.api.dropWatches();
  }

  /**
   * The EndpointSlice and Endpoints controllers after a change: at once, or `endpointSliceDelayMs`
   * later, as kube-controller-manager writes them after it has seen the change (~10 ms; about 1 s
   * after an API server restart). A stopped simulator reconciles nothing.
   */
  private reconcile(run: () => void): void {
    const delay = this.endpointSliceDelayMs;
    if (delay <= 0) return run();
    const timer = setTimeout(() => {
      if (!this.stopped) run();
    }, delay);
    timer.unref();
  }

  /** Extension: BOOKMARK events this often on watches that allow them (default 60000, as the watch cache; 0: none). */
  setBookmarkInterval(ms: number): void {
    this.api.bookmarkIntervalMs = ms;
  }

  /** Extension: the list and watch requests served so far, in order. */
  get listWatchLog(): ReadonlyArray<{ at: number; verb: 'list' | 'watch'; path: string; resourceVersion?: string; watchList: boolean }> {
    return this.api.listWatchLog;
  }

  /** Extension: every impersonation the API server honoured (user, groups as sent plus system:authenticated, uid). */
  get impersonations(): ReadonlyArray<{ user: string; groups: string[]; uid?: string }> {
    return this.api.impersonations;
  }

  /** Extension: new watch requests get no answer, not even headers, until turned off. */
  stallWatches(on: boolean): void {
    this.api.stallWatches = on;
  }

  /**
   * Extension: LIST requests get no answer while on; turned off, the held ones are answered then
   * (with stallWatches or endWatchesAtOnce: a first sync that cannot finish, even by a paged LIST).
   */
  stallLists(on: boolean): void {
    this.api.holdLists(on);
  }

  /** Extension: new watches are answered and ended at once, empty (a proxy in between that cuts streams). */
  endWatchesAtOnce(on: boolean): void {
    this.api.endWatchesAtOnce = on;
  }

  /** Extension: every open watch goes silent without ending (a dead path TCP has not noticed); returns how many. */
  freezeWatches(): number {
    return this.api.freezeWatches();
  }

  compact(): void {
    this.store.compact();
  }

  /**
   * Extension, for teardown: the runtime's close grace is over. Stream pairs waiting it out (one
   * direction ended, as after a client's FIN) end now, in both kubelets, and from now on a pair
   * ends as soon as one direction does (closeGraceMs 0: a FIN still on its way is not missed).
   * A proxy stopped after that has no finished stream left to drain. Returns how many ended now.
   */
  endLingeringStreams(): number {
    this.closeGraceMs = 0;
    return this.kubelet.endLingering() + this.spdyKubelet.endLingering();
  }

  /**
   * `down`: milliseconds, or a promise: down until it settles (a test brings it back when it has
   * seen what it waits for). The watch history is lost, as a real API server's watch cache is (it
   * starts from a fresh list): a watch resumed from any older resourceVersion gets 410 Expired.
   * `initialisingMs`: for that long after it is back, the watch caches are still filling, as
   * upstream's are on a big cluster: every WATCH, and each LIST they would serve, gets 429 "storage
   * is (re)initializing" with Retry-After (a paged LIST without selectors is served, from etcd).
   */
  async restartApiServer(down: number | PromiseLike<unknown> = 200, opts: { initialisingMs?: number } = {}): Promise<void> {
    await this.api.close();
    this.kubelet.closeAll();
    this.spdyKubelet.closeAll();
    if (typeof down === 'number') await new Promise((r) => setTimeout(r, down));
    else await Promise.resolve(down).catch(() => undefined);
    this.store.compact();
    const since = Date.now();
    this.api.cacheInitialising = opts.initialisingMs ? { since, until: since + opts.initialisingMs } : undefined;
    await this.api.listen();
  }

  /** Extension: where the simulated kubelet dials a pod port (the pod IP, or the loopback fallback when that was taken). */
  backendAddress(namespace: string, name: string, port: number): { host: string; port: number } | undefined {
    return this.pods.get(`${namespace}/${name}`)?.backends?.target(port);
  }

  podIP(namespace: string, name: string): string {
    const rt = this.pods.get(`${namespace}/${name}`);
    if (rt) return rt.ip;
    const pod = this.store.get('pods', namespace, name) as any;
    if (!pod) throw new Error(`pods "${name}" not found`);
    return pod.status?.podIP ?? '';
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.kubelet.closeAll();
    this.spdyKubelet.closeAll();
    await this.api.close();
    await Promise.all([...this.pods.values()].map((p) => p.backends?.stop()));
    this.pods.clear();
  }
}

export { seedSampleCluster } from './sample.js';
export { seedIngressCluster, INGRESS_SAMPLE } from './ingress-sample.js';
