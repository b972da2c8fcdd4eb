import { existsSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import { StartupError, errorMessage } from '../core/errors.js';
import { withOidcRefresh } from './oidc.js';

export interface LoadedKubeConfig {
  kc: KubeConfig;
  context: string;
  namespace: string;
  server: string;
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
  return { kc: withOidcRefresh(kc), context, namespace: opts.namespace || ctx.namespace || 'default', server: cluster.server };
}

/** client-node invents a "loaded-context" at http://localhost:8080 when it finds nothing at all. */
function isClientNodeFallback(kc: KubeConfig): boolean {
  const cluster = kc.getCurrentCluster();
  return kc.getCurrentContext() === 'loaded-context' && cluster?.server === 'http://localhost:8080';
}
