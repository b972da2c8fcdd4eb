// kubeconfig rendering (clientcmd v1 Config, staging/src/k8s.io/client-go/tools/clientcmd/api/v1/
// types.go) for the three credential styles the simulator supports: bearer token, client
// certificate, and an exec credential plugin (client.authentication.k8s.io/v1 ExecCredential).
// Every scalar is written as a JSON string, which is a valid YAML double-quoted scalar.

export type KubeconfigAuth =
  | { kind: 'token'; token: string }
  | { kind: 'cert'; certPem: string; keyPem: string }
  | { kind: 'exec'; command: string; args: string[]; env: Record<string, string> };

export interface KubeconfigParams {
  server: string;
  caPem?: string; // omitted when insecureSkipTlsVerify
  insecureSkipTlsVerify?: boolean;
  context: string;
  namespace?: string;
  auth: KubeconfigAuth;
}

const q = (s: string): string => JSON.stringify(s);
const b64 = (s: string): string => Buffer.from(s).toString('base64');

export function renderKubeconfig(p: KubeconfigParams): string {
  const name = p.context;
  const lines: string[] = ['apiVersion: v1', 'kind: Config', 'clusters:', `- name: ${q(name)}`, '  cluster:', `    server: ${q(p.server)}`];
  if (p.insecureSkipTlsVerify) lines.push('    insecure-skip-tls-verify: true');
  else if (p.caPem) lines.push(`    certificate-authority-data: ${q(b64(p.caPem))}`);
  lines.push('contexts:', `- name: ${q(name)}`, '  context:', `    cluster: ${q(name)}`, `    user: ${q(name)}`);
  if (p.namespace) lines.push(`    namespace: ${q(p.namespace)}`);
  lines.push(`current-context: ${q(name)}`, 'preferences: {}', 'users:', `- name: ${q(name)}`, '  user:');
  const a = p.auth;
  if (a.kind === 'token') {
    lines.push(`    token: ${q(a.token)}`);
  } else if (a.kind === 'cert') {
    lines.push(`    client-certificate-data: ${q(b64(a.certPem))}`, `    client-key-data: ${q(b64(a.keyPem))}`);
  } else {
    lines.push('    exec:', `      apiVersion: ${q('client.authentication.k8s.io/v1')}`, `      command: ${q(a.command)}`, '      args:');
    for (const arg of a.args) lines.push(`      - ${q(arg)}`);
    lines.push('      env:');
    for (const [k, v] of Object.entries(a.env)) lines.push(`      - name: ${q(k)}`, `        value: ${q(v)}`);
    lines.push(`      interactiveMode: ${q('Never')}`, '      provideClusterInfo: false');
  }
  return lines.join('\n') + '\n';
}
