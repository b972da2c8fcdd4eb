// The transient kubeconfig a managed daemon runs from: the chosen context only, flattened so it
// stands alone (a CA file embedded as *-data; a tokenFile, and a client certificate and key that
// both come from files, kept as absolute paths, since they are renewed in place and client-go
// reads them again: transport/cert_rotation.go), written 0600 into the proxy's 0700 directory. Exec
// plugins and auth-provider blocks are kept as they are: they run (and refresh) in the daemon
// exactly as in the foreground proxy. A relative exec command (`./cred.sh`) is already absolute here:
// loadKubeConfig resolved it against its kubeconfig's directory, as kubectl does, so the daemon
// never runs a program from whatever directory it was started in.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { StartupError, errorMessage } from '../core/errors.js';
import { writePrivateFile } from './private-file.js';
import { OIDC_STORE_EXTENSION } from '../cluster/oidc-store.js';
import { withoutExecInfo } from '../cluster/exec-info.js';
import type { Impersonation } from '../cluster/impersonation.js';

type Obj = Record<string, unknown>;

/** A single-context kubeconfig (JSON, which kubectl and client-node read as YAML). */
export function flattenKubeConfig(kc: KubeConfig, namespace: string, tokenFile?: string, impersonation?: Impersonation, oidcStore?: string): Obj {
  const contextName = kc.getCurrentContext();
  const ctx = kc.getContextObject(contextName);
  if (!ctx) throw new StartupError(`context "${contextName}" not found in kubeconfig`);
  const cluster = kc.getCluster(ctx.cluster);
  const user = kc.getUser(ctx.user);
  if (!cluster) throw new StartupError(`context "${contextName}" names cluster "${ctx.cluster}", which the kubeconfig does not define`);
  if (!user) throw new StartupError(`context "${contextName}" names user "${ctx.user}", which the kubeconfig does not define`);
  const clusterOut = compact({
    server: cluster.server,
    'certificate-authority-data': cluster.caData || embed(cluster.caFile, 'certificate-authority', `cluster "${cluster.name}"`),
    'insecure-skip-tls-verify': cluster.skipTLSVerify || undefined,
    'tls-server-name': cluster.tlsServerName,
    'proxy-url': cluster.proxyUrl,
  });
  const owner = `user "${user.name}"`;
  // Both from files: kept as files, checked readable now. A pair half data, half file is embedded
  // whole (it stands alone as it is, and client-go rotates only a pair of files).
  const certFiles = !user.certData && !user.keyData && user.certFile && user.keyFile;
  const userOut = compact({
    ...(certFiles
      ? { 'client-certificate': readable(user.certFile!, 'client-certificate', owner), 'client-key': readable(user.keyFile!, 'client-key', owner) }
      : {
          'client-certificate-data': user.certData || embed(user.certFile, 'client-certificate', owner),
          'client-key-data': user.keyData || embed(user.keyFile, 'client-key', owner),
        }),
    // A tokenFile stays a file (absolute): the daemon re-reads it as it rotates. A token beside it
    // stays too: kubectl sends it while the file cannot be read.
    tokenFile,
    token: user.token,
    username: user.username,
    password: user.password,
    as: user.impersonateUser,
    'as-groups': impersonation?.groups.length ? impersonation.groups : undefined,
    'as-uid': impersonation?.uid,
    'as-user-extra': impersonation && Object.keys(impersonation.extra).length > 0 ? impersonation.extra : undefined,
    exec: user.exec ? { ...user.exec, env: withoutExecInfo(user.exec.env ?? []) } : undefined,
    'auth-provider': user.authProvider ?? undefined,
    // The user's own file keeps an oidc user's tokens (cluster/oidc-store.ts), not this copy.
    extensions: oidcStore ? [{ name: OIDC_STORE_EXTENSION, extension: { file: oidcStore } }] : undefined,
  });
  return {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: cluster.name, cluster: clusterOut }],
    users: [{ name: user.name, user: userOut }],
    contexts: [{ name: contextName, context: compact({ cluster: cluster.name, user: user.name, namespace }) }],
    'current-context': contextName,
    preferences: {},
  };
}

/** Writes the flattened kubeconfig with mode 0600 (never logged, never printed). */
export function writeTransientKubeConfig(
  file: string,
  kc: KubeConfig,
  namespace: string,
  tokenFile?: string,
  impersonation?: Impersonation,
  oidcStore?: string,
): void {
  writePrivateFile(file, `${JSON.stringify(flattenKubeConfig(kc, namespace, tokenFile, impersonation, oidcStore), null, 2)}\n`);
}

function embed(file: string | undefined, field: string, owner: string): string | undefined {
  if (!file) return undefined;
  try {
    return readFileSync(file).toString('base64');
  } catch (err) {
    throw new StartupError(`cannot read the ${field} file ${file} of ${owner}: ${errorMessage(err)}`, { cause: err });
  }
}

/** The file as an absolute path, once it is known to be readable (else the error embed gives). */
function readable(file: string, field: string, owner: string): string {
  embed(file, field, owner);
  return path.resolve(file);
}

function compact(obj: Obj): Obj {
  return Object.fromEntries(Object.entries(obj).filter(([, v]) => v !== undefined && v !== null && v !== ''));
}
