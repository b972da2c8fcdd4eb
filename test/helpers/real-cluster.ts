// A real Kubernetes control plane on loopback for the tests: embedded etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler built from k8s.io/kubernetes (v1.37.2, or v1.34.4 with
// version: 'v1.34'), and a node stand-in serving the kubelet's port-forward with the upstream CRI
// streaming server (see docs/real-cluster.md). The binaries come from test/real-cluster/build.sh
// (real-cluster-build.ts finds them); when they are not built the tests skip with a reason, except
// where PROXYOUT_REQUIRE_REAL_CLUSTER=1 (CI builds them first), where they fail.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { appendFile, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { CONTROL_PLANES, binaryPath, notBuiltReason, type Binary, type ControlPlaneVersion } from './real-cluster-build.js';
import { Components, freePort, tail } from './real-cluster-components.js';
import { SimPki } from '../sim/pki.js';
import {
  apiServerArgs,
  controllerManagerArgs,
  kubeconfigYaml,
  limitedUserManifests,
  runKubectl,
  SERVICE_RANGES,
  writeTokens,
  type KubectlOptions,
  type KubectlResult,
} from './real-cluster-config.js';
import { startTcpBalancer, type TcpBalancer } from './tcp-balancer.js';

export {
  CONTROL_PLANES,
  KUBERNETES_VERSION,
  binDir,
  buildKey,
  cacheRoot,
  isBuilt,
  skipUnlessRealCluster,
  type ControlPlaneVersion,
} from './real-cluster-build.js';
export type { KubectlResult } from './real-cluster-config.js';

export interface RealCluster {
  /** https://127.0.0.1:PORT (https://[::1]:PORT with apiServerHost '::1') */
  server: string;
  /** Path of a kubeconfig with contexts admin (token, current), limited (token, namespace-limited) and cert (client certificate). */
  kubeconfig: string;
  /** The namespace the limited user administers (and nothing else). */
  limitedNamespace: string;
  tokens: { admin: string; limited: string };
  dir: string;
  /** With StartOptions.authenticationConfig: the file kube-apiserver reads it from (rewrite it to change it: the server reloads it). */
  authenticationConfigFile?: string;
  /** Milliseconds from start to ready. */
  startupMs: number;
  /** The control plane's release (its /version gitVersion), e.g. v1.37.2. */
  kubernetesVersion: string;
  /** Real kubectl against this cluster (context admin unless args name another); throws on a non-zero exit unless allowFail. */
  kubectl(args: string[], opts?: KubectlOptions): Promise<KubectlResult>;
  /** A GET against the API server as admin; parsed JSON. */
  get<T = unknown>(apiPath: string): Promise<T>;
  /** Any request as admin (a JSON body when given); the status and the body as text. */
  request(method: string, apiPath: string, body?: unknown): Promise<{ status: number; body: string }>;
  /**
   * A client certificate for user `name` (in system:masters) from the cluster's CA, valid for
   * `validSeconds` from now (proxyout-pki --client): the paths of its PEM certificate and key, in the
   * bed's pki directory (issuing the same name again rewrites them in place).
   */
  issueClientCert(name: string, validSeconds: number): Promise<{ cert: string; key: string }>;
  /**
   * The API server's serving certificate replaced by one from a new CA (kube-apiserver reloads the
   * file at once; connections open before keep the old one); the new CA joins the bed's CA file,
   * which components started later trust. Returns the new CA's PEM.
   */
  rotateServingCa(): Promise<string>;
  /** Compacts etcd at its current revision; returns that revision. */
  compact(): Promise<number>;
  /**
   * Stops an API server (SIGTERM; `index` of apiServers, default 0), runs whileDown, and starts it
   * again on the same port (apiServerFlags, when given, replace the start's; version, when given,
   * runs that control plane's kube-apiserver from then on: an upgrade or a downgrade); resolves when ready.
   */
  restartApiServer(opts?: { whileDown?: () => Promise<void>; apiServerFlags?: string[]; index?: number; version?: ControlPlaneVersion }): Promise<void>;
  /** SIGKILL to the node stand-in (every node): a kubelet that dies; it is not started again. */
  killNode(): Promise<void>;
  /**
   * Restarts the node stand-in (every node), as a kubelet restart: SIGKILL (or SIGTERM), down for
   * `downMs`, then started again on the same ports; its pods keep their IPs. Resolves when it
   * serves again (its pods' statuses may still be on their way).
   */
  restartNode(opts?: { downMs?: number; signal?: 'SIGKILL' | 'SIGTERM'; whileDown?: () => Promise<void> }): Promise<void>;
  /** SIGSTOP (a hung kubelet: its port accepts and nothing answers) or SIGCONT to the node stand-in (every node). */
  freezeNode(frozen: boolean): void;
  /** SIGSTOP (hung: it accepts connections and answers nothing) or SIGCONT to API server `index` (default 0). */
  freezeApiServer(frozen: boolean, index?: number): void;
  /** How many API servers share etcd (more than one: behind the balancer `server` names). */
  apiServers: number;
  /** Throws (with the log's last lines) if a component has died. */
  assertHealthy(): void;
  /** The last lines of a component's log. */
  logTail(component: string, lines?: number): string;
  stop(): Promise<void>;
}

// Components must not outlive the test process, even one that crashes or is killed: on Linux each
// runs under setpriv --pdeathsig KILL (killed when this process dies); and an exiting process
// SIGKILLs whatever is still running.
export interface StartOptions {
  /** The control plane's version (default v1.37: v1.37.2; v1.34: v1.34.4, with a node that does not tunnel, as a v1.34 kubelet). */
  version?: ControlPlaneVersion;
  /** Names of the stand-in nodes (default one, node-1). */
  nodes?: string[];
  /** Namespace the limited user administers (default shop). */
  limitedNamespace?: string;
  /**
   * How many kube-apiservers share etcd (default 1). More than one: a highly available control
   * plane, behind a TCP balancer (tcp-balancer.ts) that every kubeconfig names.
   */
  apiServers?: number;
  /**
   * A dual-stack cluster, by its primary family: ClusterIP ranges 10.96.0.0/16 and fd00:96::/108
   * (that order for IPv4, the other for IPv6), pods with an address in each family (node i:
   * 10.244.i.h and fd00:10:244:i::h). Default: IPv4 only.
   */
  dualStack?: 'IPv4' | 'IPv6';
  /** The loopback address the API servers serve on and every kubeconfig names (default 127.0.0.1). */
  apiServerHost?: '127.0.0.1' | '::1';
  /** Extra kube-apiserver flags (e.g. --feature-gates=PortForwardWebsockets=false,WatchList=false). */
  apiServerFlags?: string[];
  /** Extra proxyout-node flags (e.g. --websocket-tunnel=false: a kubelet that does not tunnel SPDY in a WebSocket). */
  nodeFlags?: string[];
  /** Extra kube-controller-manager and kube-scheduler flags (e.g. --kube-api-qps for thousands of pods). */
  controllerManagerFlags?: string[];
  schedulerFlags?: string[];
  /**
   * A structured AuthenticationConfiguration (YAML; real-cluster-jwt.ts writes one for a JWT
   * issuer), given to every kube-apiserver with --authentication-config, beside the static tokens.
   */
  authenticationConfig?: string;
  /** Keep the temp dir (logs, kubeconfig) after stop. Also PROXYOUT_KEEP_REAL_CLUSTER=1. */
  keep?: boolean;
  /** Progress lines go here (default: nowhere). */
  progress?: (line: string) => void;
}

export async function startRealCluster(opts: StartOptions = {}): Promise<RealCluster> {
  const t0 = Date.now();
  const version = opts.version ?? 'v1.37';
  const bin = (b: Binary) => binaryPath(version, b);
  const notBuilt = notBuiltReason(version);
  if (notBuilt) throw new Error(notBuilt);
  const progress = opts.progress ?? (() => {});
  const dir = await mkdtemp(path.join(os.tmpdir(), 'proxyout-real-cluster-'));
  const pki = path.join(dir, 'pki');
  const p = (f: string) => path.join(pki, f);
  const limitedNamespace = opts.limitedNamespace ?? 'shop';
  const components = new Components(dir, progress);
  const apiCount = opts.apiServers ?? 1;
  const apiName = (i: number) => (i === 0 ? 'kube-apiserver' : `kube-apiserver-${i + 1}`);
  let balancer: TcpBalancer | undefined;
  const stopAll = async () => {
    const apiNames = Array.from({ length: apiCount }, (_, i) => apiName(i));
    await components.stopAll(['proxyout-node', 'kube-scheduler', 'kube-controller-manager', ...apiNames, 'etcd']);
    await balancer?.close();
    if (!(opts.keep || process.env.PROXYOUT_KEEP_REAL_CLUSTER === '1')) await rm(dir, { recursive: true, force: true });
  };
  const launch = (name: string, file: Binary, args: string[]) => components.launch(name, bin(file), args);
  const waitFor = <T>(what: string, check: () => Promise<T | undefined>, timeoutMs?: number) => components.waitFor(what, check, timeoutMs);

  try {
    // PKI, tokens, kubeconfigs.
    const runPki = async (args: string[]) => {
      const pkiRun = spawn(bin('proxyout-pki'), ['--dir', pki, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
      let pkiErr = '';
      pkiRun.stderr!.setEncoding('utf8').on('data', (d: string) => (pkiErr += d));
      const [pkiCode] = (await once(pkiRun, 'exit')) as [number | null];
      if (pkiCode !== 0) throw new Error(`proxyout-pki failed: ${pkiErr}`);
    };
    await runPki([]);
    const tokens = await writeTokens(dir);
    const authenticationConfigFile = opts.authenticationConfig === undefined ? undefined : path.join(dir, 'authentication-config.yaml');
    if (authenticationConfigFile) await writeFile(authenticationConfigFile, opts.authenticationConfig!, { mode: 0o600 });
    const ca = p('ca.crt');
    const caPem = await readFile(ca);

    // etcd
    const etcdReady = path.join(dir, 'etcd.json');
    launch('etcd', 'proxyout-etcd', ['--data-dir', path.join(dir, 'etcd'), '--ready-file', etcdReady]);
    const etcd = await waitFor('etcd serving', async () =>
      existsSync(etcdReady) ? (JSON.parse(await readFile(etcdReady, 'utf8')) as { clientURL: string; controlURL: string }) : undefined,
    );
    progress(`etcd ${etcd.clientURL} (${Date.now() - t0} ms)`);

    // kube-apiserver (one, or several behind a balancer)
    const apiPorts: number[] = [];
    const apiHost = opts.apiServerHost ?? '127.0.0.1';
    for (let i = 0; i < apiCount; i++) apiPorts.push(await freePort(apiHost));
    const direct = (i: number) => `https://${apiHost.includes(':') ? `[${apiHost}]` : apiHost}:${apiPorts[i]}`;
    let server = direct(0);
    const apiArgs = (i: number) =>
      apiServerArgs({
        etcd: etcd.clientURL,
        port: apiPorts[i]!,
        certDir: path.join(dir, i === 0 ? 'apiserver-certs' : `apiserver-certs-${i + 1}`),
        dir,
        pki: p,
        host: apiHost,
        serviceRanges: opts.dualStack ? SERVICE_RANGES[opts.dualStack] : undefined,
      }).concat(authenticationConfigFile ? [`--authentication-config=${authenticationConfigFile}`] : []);
    // What restartApiServer may replace (e.g. feature gates turned off for the rest of a test file).
    let extraApiFlags = opts.apiServerFlags ?? [];
    let adminAgent = new https.Agent({ ca: caPem, keepAlive: true });
    const request = (method: string, apiPath: string, timeoutMs = 10_000, body?: unknown, base = server): Promise<{ status: number; body: string }> =>
      new Promise((resolve, reject) => {
        const headers: Record<string, string> = { authorization: `Bearer ${tokens.admin}` };
        if (body !== undefined) headers['content-type'] = 'application/json';
        const req = https.request(`${base}${apiPath}`, { method, agent: adminAgent, headers, timeout: timeoutMs }, (res) => {
          let body = '';
          res.setEncoding('utf8').on('data', (d: string) => (body += d));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
          res.on('error', reject);
        });
        req.on('timeout', () => req.destroy(new Error(`${method} ${apiPath}: timed out`)));
        req.on('error', reject);
        req.end(body === undefined ? undefined : JSON.stringify(body));
      });
    const get = async <T>(apiPath: string): Promise<T> => {
      const r = await request('GET', apiPath);
      if (r.status !== 200) throw new Error(`GET ${apiPath}: ${r.status} ${r.body.slice(0, 300)}`);
      return JSON.parse(r.body) as T;
    };
    let apiVersion = version;
    const startApiServer = async (i: number) => {
      components.launch(apiName(i), binaryPath(apiVersion, 'kube-apiserver'), [...apiArgs(i), ...extraApiFlags]);
      await waitFor(
        `${apiName(i)} ready`,
        async () => ((await request('GET', '/readyz', 2000, undefined, direct(i))).status === 200 ? true : undefined),
        90_000,
      );
      progress(`${apiName(i)} ${direct(i)} ready (${Date.now() - t0} ms)`);
    };
    for (let i = 0; i < apiCount; i++) await startApiServer(i);
    if (apiCount > 1) {
      balancer = await startTcpBalancer(
        apiPorts.map((port) => ({ host: apiHost, port })),
        apiHost,
      );
      server = `https://${balancer.host.includes(':') ? `[${balancer.host}]` : balancer.host}:${balancer.port}`;
      progress(`balancer ${server} in front of ${apiCount} API servers`);
    }

    const kubeconfig = path.join(dir, 'kubeconfig');
    await writeFile(
      kubeconfig,
      kubeconfigYaml(
        server,
        ca,
        [
          { name: 'admin', token: tokens.admin },
          { name: 'limited', token: tokens.limited, namespace: limitedNamespace },
          { name: 'cert', cert: [p('cert-user.crt'), p('cert-user.key')] },
        ],
        'admin',
      ),
      { mode: 0o600 },
    );
    const componentConfig = async (name: string, tok: string) => {
      const f = path.join(dir, `${name}.kubeconfig`);
      await writeFile(f, kubeconfigYaml(server, ca, [{ name, token: tok }], name), { mode: 0o600 });
      return f;
    };

    launch('kube-controller-manager', 'kube-controller-manager', [
      ...controllerManagerArgs(await componentConfig('kube-controller-manager', tokens.kcm)),
      ...(opts.controllerManagerFlags ?? []),
    ]);
    launch('kube-scheduler', 'kube-scheduler', [
      `--kubeconfig=${await componentConfig('kube-scheduler', tokens.scheduler)}`,
      '--leader-elect=false',
      '--secure-port=0',
      ...(opts.schedulerFlags ?? []),
    ]);
    const nodeNames = opts.nodes ?? ['node-1'];
    const nodeReady = path.join(dir, 'node.json');
    const nodeArgs = [
      `--kubeconfig=${await componentConfig('proxyout-node', tokens.node)}`,
      `--nodes=${nodeNames.join(',')}`,
      `--tls-cert-file=${p('node.crt')}`,
      `--tls-private-key-file=${p('node.key')}`,
      `--client-ca-file=${ca}`,
      `--ready-file=${nodeReady}`,
      // A v1.34 kubelet does not tunnel SPDY in a WebSocket (ExtendWebSocketsToKubelet came in
      // v1.36); first, so that nodeFlags can say otherwise.
      ...(version === 'v1.34' ? ['--websocket-tunnel=false'] : []),
      ...(opts.dualStack ? [`--pod-ip-families=${opts.dualStack === 'IPv4' ? 'ipv4,ipv6' : 'ipv6,ipv4'}`] : []),
      ...(opts.nodeFlags ?? []),
    ];
    launch('proxyout-node', 'proxyout-node', nodeArgs);

    const kubectl: RealCluster['kubectl'] = (args, o) => runKubectl(kubeconfig, args, o);
    await kubectl(['apply', '-f', '-'], { input: limitedUserManifests(limitedNamespace) });

    type NodeList = {
      items: Array<{ metadata: { name: string }; spec?: { taints?: unknown[] }; status?: { conditions?: Array<{ type: string; status: string }> } }>;
    };
    await waitFor('nodes Ready and untainted', async () => {
      const list = await get<NodeList>('/api/v1/nodes');
      const ready = list.items
        .filter((n) => n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') && !(n.spec?.taints ?? []).length)
        .map((n) => n.metadata.name);
      return nodeNames.every((n) => ready.includes(n)) ? true : undefined;
    });
    for (const ns of ['default', limitedNamespace]) {
      await waitFor(`ServiceAccount ${ns}/default`, async () =>
        (await request('GET', `/api/v1/namespaces/${ns}/serviceaccounts/default`)).status === 200 ? true : undefined,
      );
    }
    // The admin ClusterRole gets its rules from the aggregation controller.
    await waitFor('ClusterRole admin aggregated', async () => {
      const role = await get<{ rules?: unknown[] }>('/apis/rbac.authorization.k8s.io/v1/clusterroles/admin');
      return role.rules && role.rules.length > 0 ? true : undefined;
    });
    const startupMs = Date.now() - t0;
    progress(`cluster ready (${startupMs} ms); logs and kubeconfig in ${dir}`);

    return {
      server,
      kubeconfig,
      limitedNamespace,
      tokens: { admin: tokens.admin, limited: tokens.limited },
      dir,
      authenticationConfigFile,
      startupMs,
      kubernetesVersion: CONTROL_PLANES[version].kubernetes,
      kubectl,
      get,
      request: (method, apiPath, body) => request(method, apiPath, 30_000, body),
      async issueClientCert(name, validSeconds) {
        await runPki(['--client', name, '--valid', `${validSeconds}s`]);
        return { cert: p(`${name}.crt`), key: p(`${name}.key`) };
      },
      async rotateServingCa() {
        const next = new SimPki();
        const serving = next.servingCert();
        // Key then certificate, each by a rename: the API server never reads half a file.
        for (const [file, pem] of [
          ['apiserver.key', serving.keyPem],
          ['apiserver.crt', serving.certPem],
        ] as const) {
          await writeFile(p(`${file}.new`), pem, { mode: 0o600 });
          await rename(p(`${file}.new`), p(file));
        }
        await appendFile(ca, next.caPem);
        adminAgent.destroy();
        adminAgent = new https.Agent({ ca: await readFile(ca), keepAlive: true });
        return next.caPem;
      },
      async compact() {
        const res = await fetch(`${etcd.controlURL}/compact`, { method: 'POST' });
        if (!res.ok) throw new Error(`etcd compact: ${res.status} ${await res.text()}`);
        return ((await res.json()) as { revision: number }).revision;
      },
      async restartApiServer(o = {}) {
        const i = o.index ?? 0;
        if (i < 0 || i >= apiCount) throw new Error(`restartApiServer: no API server ${i} of ${apiCount}`);
        components.assertHealthy();
        await components.stop(apiName(i));
        await o.whileDown?.();
        if (o.apiServerFlags) extraApiFlags = o.apiServerFlags;
        if (o.version) apiVersion = o.version;
        await startApiServer(i);
      },
      apiServers: apiCount,
      assertHealthy: () => components.assertHealthy(),
      killNode: () => components.kill('proxyout-node'),
      async restartNode(o = {}) {
        components.assertHealthy();
        const ports = JSON.parse(await readFile(nodeReady, 'utf8')) as Record<string, number>;
        if (o.signal === 'SIGTERM') await components.stop('proxyout-node');
        else await components.kill('proxyout-node');
        await rm(nodeReady, { force: true });
        await Promise.all([delay(o.downMs ?? 0), o.whileDown?.()]);
        launch('proxyout-node', 'proxyout-node', [...nodeArgs, `--ports=${nodeNames.map((n) => ports[n]).join(',')}`]);
        await waitFor('node stand-in serving again', async () => (existsSync(nodeReady) ? true : undefined));
      },
      freezeNode: (frozen) => components.signal('proxyout-node', frozen ? 'SIGSTOP' : 'SIGCONT'),
      freezeApiServer: (frozen, index = 0) => components.signal(apiName(index), frozen ? 'SIGSTOP' : 'SIGCONT'),
      logTail: (component, lines) => tail(path.join(dir, `${component}.log`), lines),
      stop: stopAll,
    };
  } catch (err) {
    const logs = components.logs();
    await stopAll().catch(() => {});
    throw new Error(`${err instanceof Error ? err.message : String(err)}\n${logs}`);
  }
}
