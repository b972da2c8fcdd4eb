// The in-cluster configuration, read as kubectl reads it (client-go rest.InClusterConfig and
// clientcmd's inClusterClientConfig) when no kubeconfig file exists: inside a pod, from the
// KUBERNETES_SERVICE_HOST/PORT variables and the mounted service-account files. client-node's own
// loader differs where users meet it: the token and the namespace kept a trailing newline (an
// invalid Authorization header; namespace "shop\n"), POD_NAMESPACE was ignored, the variables
// unset read as server "https://undefined:undefined", and ports 80, 8080, 8001 meant http.
import { existsSync, readFileSync, statSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
/** client-node's names, kept: a managed proxy's ID and its route are derived from the context. */
export const IN_CLUSTER = { cluster: 'inCluster', user: 'inClusterUser', context: 'inClusterContext' } as const;

export interface InClusterConfig {
  /** For KubeConfig.loadFromOptions. */
  options: {
    clusters: Array<{ name: string; server: string; caFile?: string; skipTLSVerify: boolean }>;
    users: Array<{ name: string }>;
    contexts: Array<{ name: string; cluster: string; user: string; namespace?: string }>;
    currentContext: string;
  };
  /** Read again as it rotates (token-source.ts TokenFileSource), as client-go does. */
  tokenFile: string;
}

/**
 * The in-cluster configuration, or why there is none: `undefined` outside a pod (no token file),
 * a sentence when the token is there but the variables are not (a `sudo`, an `env -i`, a
 * service's clean environment strip them; kubectl then says nothing of the sort and dials
 * localhost:8080).
 */
export function inClusterConfig(env: NodeJS.ProcessEnv = process.env, dir: string = SERVICE_ACCOUNT_DIR): InClusterConfig | string | undefined {
  const tokenFile = path.join(dir, 'token');
  if (!isFile(tokenFile)) return undefined;
  const host = env.KUBERNETES_SERVICE_HOST ?? '';
  const port = env.KUBERNETES_SERVICE_PORT ?? '';
  if (!host || !port) {
    const unset = [!host && 'KUBERNETES_SERVICE_HOST', !port && 'KUBERNETES_SERVICE_PORT'].filter(Boolean).join(' and ');
    return `the service-account token ${tokenFile} is there, but without ${unset} (sudo and env -i drop them) the in-cluster configuration is not used, as by kubectl`;
  }
  const caFile = path.join(dir, 'ca.crt');
  const namespace = env.POD_NAMESPACE || readTrimmed(path.join(dir, 'namespace'));
  return {
    options: {
      clusters: [
        {
          name: IN_CLUSTER.cluster,
          server: `https://${net.isIPv6(host) ? `[${host}]` : host}:${port}`,
          // client-go takes the CA when it is there, else the system's roots.
          ...(existsSync(caFile) ? { caFile } : {}),
          skipTLSVerify: false,
        },
      ],
      users: [{ name: IN_CLUSTER.user }],
      contexts: [{ name: IN_CLUSTER.context, cluster: IN_CLUSTER.cluster, user: IN_CLUSTER.user, ...(namespace ? { namespace } : {}) }],
      currentContext: IN_CLUSTER.context,
    },
    tokenFile,
  };
}

function isFile(file: string): boolean {
  try {
    return !statSync(file).isDirectory();
  } catch {
    return false;
  }
}

function readTrimmed(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}
