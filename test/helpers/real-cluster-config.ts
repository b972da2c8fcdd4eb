// What the test bed's components are given (real-cluster.ts): the static tokens, the kubeconfigs,
// kube-apiserver's and the controllers' flags, the limited user's RoleBinding, and real kubectl.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';

export interface KubectlResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface KubectlOptions {
  input?: string;
  allowFail?: boolean;
  context?: string;
  timeoutMs?: number;
}

export type Tokens = Record<'admin' | 'limited' | 'kcm' | 'scheduler' | 'node', string>;

/** Fresh static tokens, written as kube-apiserver's --token-auth-file `<dir>/tokens.csv`. */
export async function writeTokens(dir: string): Promise<Tokens> {
  const token = () => randomBytes(16).toString('hex');
  const tokens: Tokens = { admin: token(), limited: token(), kcm: token(), scheduler: token(), node: token() };
  await writeFile(
    path.join(dir, 'tokens.csv'),
    [
      `${tokens.admin},proxyout-admin,uid-admin,"system:masters"`,
      `${tokens.limited},proxyout-limited,uid-limited`,
      // The components act as cluster admins: the test bed checks the proxy, not their RBAC.
      `${tokens.kcm},system:kube-controller-manager,uid-kcm,"system:masters"`,
      `${tokens.scheduler},system:kube-scheduler,uid-scheduler,"system:masters"`,
      `${tokens.node},proxyout-node,uid-node,"system:masters"`,
    ].join('\n') + '\n',
    { mode: 0o600 },
  );
  return tokens;
}

export function kubeconfigYaml(
  server: string,
  caFile: string,
  users: Array<{ name: string; token?: string; cert?: [string, string]; namespace?: string }>,
  current: string,
): string {
  const ctx = users.map((u) => `- name: ${u.name}\n  context:\n    cluster: real\n    user: ${u.name}\n    namespace: ${u.namespace ?? 'default'}\n`).join('');
  const usr = users
    .map(
      (u) => `- name: ${u.name}\n  user:\n` + (u.token ? `    token: ${u.token}\n` : `    client-certificate: ${u.cert![0]}\n    client-key: ${u.cert![1]}\n`),
    )
    .join('');
  return `apiVersion: v1\nkind: Config\nclusters:\n- name: real\n  cluster:\n    server: ${server}\n    certificate-authority: ${caFile}\ncontexts:\n${ctx}current-context: ${current}\nusers:\n${usr}`;
}

/** The Service ClusterIP ranges of a single-stack bed and of a dual-stack one by its primary family. */
export const SERVICE_RANGES = { single: '10.96.0.0/16', IPv4: '10.96.0.0/16,fd00:96::/108', IPv6: 'fd00:96::/108,10.96.0.0/16' } as const;

/**
 * kube-apiserver's flags: `pki(file)` names a file of the bed's PKI; `certDir` is its own; `host`
 * the loopback address it serves on (127.0.0.1 or ::1), `serviceRanges` its ClusterIP ranges.
 */
export function apiServerArgs(o: {
  etcd: string;
  port: number;
  certDir: string;
  dir: string;
  pki: (file: string) => string;
  host?: string;
  serviceRanges?: string;
}): string[] {
  const ca = o.pki('ca.crt');
  const host = o.host ?? '127.0.0.1';
  return [
    `--etcd-servers=${o.etcd}`,
    `--bind-address=${host}`,
    `--advertise-address=${host}`,
    // The "kubernetes" Service's endpoints cannot be a loopback address: leave them unmanaged.
    '--endpoint-reconciler-type=none',
    `--secure-port=${o.port}`,
    `--cert-dir=${o.certDir}`,
    `--tls-cert-file=${o.pki('apiserver.crt')}`,
    `--tls-private-key-file=${o.pki('apiserver.key')}`,
    `--client-ca-file=${ca}`,
    `--token-auth-file=${path.join(o.dir, 'tokens.csv')}`,
    '--authorization-mode=Node,RBAC',
    '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
    `--service-account-key-file=${o.pki('sa.pub')}`,
    `--service-account-signing-key-file=${o.pki('sa.key')}`,
    `--service-cluster-ip-range=${o.serviceRanges ?? SERVICE_RANGES.single}`,
    `--kubelet-client-certificate=${o.pki('apiserver-kubelet-client.crt')}`,
    `--kubelet-client-key=${o.pki('apiserver-kubelet-client.key')}`,
    `--kubelet-certificate-authority=${ca}`,
    '--kubelet-preferred-address-types=InternalIP',
    '--allow-privileged=true',
    '--profiling=false',
  ];
}

/** kube-controller-manager's flags, before the caller's own. */
export function controllerManagerArgs(kubeconfig: string): string[] {
  return [
    `--kubeconfig=${kubeconfig}`,
    '--controllers=endpointslice-controller,endpointslice-mirroring-controller,endpoints-controller,deployment-controller,replicaset-controller,statefulset-controller,serviceaccount-controller,clusterrole-aggregation-controller,garbage-collector-controller,namespace-controller,node-lifecycle-controller',
    // The node lifecycle controller lifts the not-ready taint the API server puts on a new Node;
    // it looks every second here (5 s upstream) so that the first pod is scheduled at once.
    '--node-monitor-period=1s',
    '--leader-elect=false',
    '--secure-port=0',
    '--use-service-account-credentials=false',
  ];
}

/** The limited user's namespace, and the upstream admin ClusterRole bound to it there. */
export function limitedUserManifests(namespace: string): string {
  return `apiVersion: v1
kind: Namespace
metadata:
  name: ${namespace}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: proxyout-limited-admin
  namespace: ${namespace}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: admin
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: User
  name: proxyout-limited
`;
}

/** Real kubectl with this kubeconfig (context admin unless o.context); throws on a non-zero exit unless allowFail. */
export async function runKubectl(kubeconfig: string, args: string[], o: KubectlOptions = {}): Promise<KubectlResult> {
  const proc = spawn('kubectl', ['--kubeconfig', kubeconfig, '--context', o.context ?? 'admin', ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  proc.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  proc.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  proc.stdin.end(o.input ?? '');
  const timer = setTimeout(() => proc.kill('SIGKILL'), o.timeoutMs ?? 60_000);
  // 'close', not 'exit': the exit can come before the last of stdout has been read.
  const [code] = (await once(proc, 'close')) as [number | null];
  clearTimeout(timer);
  if (code !== 0 && !o.allowFail) throw new Error(`kubectl ${args.join(' ')} exited ${code}: ${stderr}${stdout}`);
  return { code, stdout, stderr };
}
