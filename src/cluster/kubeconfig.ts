import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import yaml from 'js-yaml';
import { StartupError, errorMessage } from '../core/errors.js';
import { OidcTokenSource } from './oidc.js';
import { TokenFileSource, withTokenSource } from './token-source.js';
import { addExecInfo } from './exec-info.js';

export interface LoadedKubeConfig {
  kc: KubeConfig;
  context: string;
  namespace: string;
  server: string;
  /** The user's `tokenFile`, absolute, when it has one (managed daemons keep reading it). */
  tokenFile?: string;
}

/**
 * Loads the kubeconfig the way kubectl does (--kubeconfig, else $KUBECONFIG, else ~/.kube/config)
 * through client-node, so every auth method it knows (tokens, client certs, exec plugins,
 * proxy-url) works unchanged; OIDC auth-provider refresh is ours (oidc.ts). Fails with a one-line StartupError instead of falling back to
 * client-node's silent "localhost:8080" default.
 */
export function loadKubeConfig(opts: { kubeconfig?: string; context?: string; namespace?: string }): LoadedKubeConfig {
  const kc = new KubeConfig();
  try {
    if (opts.kubeconfig) {
      if (!existsSync(opts.kubeconfig)) throw new StartupError(`kubeconfig ${opts.kubeconfig} does not exist`);
      kc.loadFromFile(opts.kubeconfig);
    } else {
      const envFiles = (process.env.KUBECONFIG ?? '').split(process.platform === 'win32' ? ';' : ':').filter(Boolean);
      if (envFiles.length > 0 && !envFiles.some((f) => existsSync(f))) {
        throw new StartupError(`no kubeconfig file from KUBECONFIG exists (${envFiles.join(', ')})`);
      }
      kc.loadFromDefault();
    }
  } catch (err) {
    if (err instanceof StartupError) throw err;
    throw new StartupError(`cannot load kubeconfig: ${errorMessage(err).split('\n')[0]}`, { cause: err });
  }
  if (kc.getContexts().length === 0 || isClientNodeFallback(kc)) {
    throw new StartupError('no kubeconfig found: pass --kubeconfig, set KUBECONFIG, or create ~/.kube/config');
  }
  if (opts.context) {
    if (!kc.getContextObject(opts.context)) {
      const known = kc.getContexts().map((c) => c.name).join(', ');
      throw new StartupError(`context "${opts.context}" not found in kubeconfig (known: ${known})`);
    }
    kc.setCurrentContext(opts.context);
  }
  const context = kc.getCurrentContext();
  const ctx = kc.getContextObject(context);
  if (!context || !ctx) throw new StartupError('the kubeconfig has no current context: pass --context');
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new StartupError(`context "${context}" names cluster "${ctx.cluster}", which the kubeconfig does not define`);
  if (!kc.getCurrentUser()) throw new StartupError(`context "${context}" names user "${ctx.user}", which the kubeconfig does not define`);
  const namespace = opts.namespace || ctx.namespace || 'default';
  addExecInfo(kc);
  const user = kc.getCurrentUser()!;
  if (user.authProvider?.name === 'oidc' && user.authProvider.config) {
    return { kc: withTokenSource(kc, new OidcTokenSource(user.authProvider.config as Record<string, string>)), context, namespace, server: cluster.server };
  }
  const tokenFile = findTokenFile(kubeconfigFiles(opts.kubeconfig), ctx.user);
  if (tokenFile) return { kc: withTokenSource(kc, new TokenFileSource(tokenFile)), context, namespace, server: cluster.server, tokenFile };
  return { kc, context, namespace, server: cluster.server };
}

/** The files kubectl would read, in order (the first to define a user wins). */
function kubeconfigFiles(explicit: string | undefined): string[] {
  if (explicit) return [explicit];
  const env = (process.env.KUBECONFIG ?? '').split(path.delimiter).filter(Boolean);
  return env.length > 0 ? env.filter((f) => existsSync(f)) : [path.join(os.homedir(), '.kube', 'config')];
}

/**
 * client-node drops a user's `tokenFile` (it knows only a non-standard `token-file`), so we read
 * it from the file ourselves: absolute, or relative to the kubeconfig that names it (client-go
 * resolves paths that way). `token-file` is taken too, to read it the way client-go would.
 */
function findTokenFile(files: string[], userName: string): string | undefined {
  for (const file of files) {
    let doc: unknown;
    try {
      doc = yaml.load(readFileSync(file, 'utf8'));
    } catch {
      continue; // client-node loaded it already; a file it could not parse is its error to report
    }
    const users = (doc as { users?: Array<{ name?: string; user?: Record<string, unknown> }> } | undefined)?.users;
    const entry = Array.isArray(users) ? users.find((u) => u?.name === userName) : undefined;
    if (!entry) continue;
    const value = entry.user?.tokenFile ?? entry.user?.['token-file'];
    return typeof value === 'string' && value ? path.resolve(path.dirname(file), value) : undefined;
  }
  return undefined;
}

/** client-node invents a "loaded-context" at http://localhost:8080 when it finds nothing at all. */
function isClientNodeFallback(kc: KubeConfig): boolean {
  const cluster = kc.getCurrentCluster();
  return kc.getCurrentContext() === 'loaded-context' && cluster?.server === 'http://localhost:8080';
}
