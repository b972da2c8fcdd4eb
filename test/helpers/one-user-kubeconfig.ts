// A kubeconfig file with one cluster (a loopback server, TLS unchecked), one user whose entry is
// given as flow YAML, and one current context: for unit tests of credentials (nothing dialled), or
// of requests to a local `server`.
import { writeFileSync } from 'node:fs';
import path from 'node:path';

export function writeOneUserKubeconfig(dir: string, user: string, names: { user?: string; context?: string; server?: string } = {}): string {
  const file = path.join(dir, 'config');
  const userName = names.user ?? 'u';
  const context = names.context ?? 'x';
  writeFileSync(
    file,
    [
      'apiVersion: v1',
      'kind: Config',
      `clusters: [{name: c, cluster: {server: "${names.server ?? 'https://127.0.0.1:6443'}", insecure-skip-tls-verify: true}}]`,
      `users: [{name: ${userName}, user: ${user}}]`,
      `contexts: [{name: ${context}, context: {cluster: c, user: ${userName}}}]`,
      `current-context: ${context}`,
      '',
    ].join('\n'),
  );
  return file;
}
