// KUBERNETES_EXEC_INFO for exec credential plugins, as client-go sets it (staging/src/k8s.io/
// client-go/plugin/pkg/client/auth/exec/exec.go): an ExecCredential in the plugin's apiVersion
// with spec.interactive, plus spec.cluster when the kubeconfig says provideClusterInfo. Plugins
// read it to pick their output version or to learn which cluster they authenticate for;
// client-node 1.x does not set it. We never have a terminal for the plugin (a daemon, or a
// foreground proxy that does not read stdin), so interactive is false, as kubectl says when
// stdin is not a terminal. (client-node keeps no cluster extensions, so spec.cluster.config is
// never sent.)
import { readFileSync } from 'node:fs';
import type { KubeConfig } from '@kubernetes/client-node';

export const EXEC_INFO_ENV = 'KUBERNETES_EXEC_INFO';

interface ExecConfig {
  apiVersion?: string;
  provideClusterInfo?: boolean;
  env?: Array<{ name: string; value: string }> | null;
}

/** Adds KUBERNETES_EXEC_INFO to the current user's exec env (in place); no-op without exec. */
export function addExecInfo(kc: KubeConfig): void {
  const exec = kc.getCurrentUser()?.exec as ExecConfig | undefined;
  const cluster = kc.getCurrentCluster();
  if (!exec || !cluster) return;
  const spec: Record<string, unknown> = { interactive: false };
  if (exec.provideClusterInfo) {
    const ca = cluster.caData ?? (cluster.caFile ? readFileSync(cluster.caFile).toString('base64') : undefined);
    spec.cluster = Object.fromEntries(
      Object.entries({
        server: cluster.server,
        'tls-server-name': cluster.tlsServerName,
        'insecure-skip-tls-verify': cluster.skipTLSVerify || undefined,
        'certificate-authority-data': ca,
        'proxy-url': cluster.proxyUrl,
      }).filter(([, v]) => v !== undefined),
    );
  }
  const info = JSON.stringify({ kind: 'ExecCredential', apiVersion: exec.apiVersion ?? 'client.authentication.k8s.io/v1', spec });
  exec.env = [...withoutExecInfo(exec.env ?? []), { name: EXEC_INFO_ENV, value: info }];
}

/** The env list without our KUBERNETES_EXEC_INFO (the transient kubeconfig must not carry it). */
export function withoutExecInfo<T extends { name: string }>(env: T[]): T[] {
  return env.filter((e) => e.name !== EXEC_INFO_ENV);
}
