import { existsSync, readFileSync } from 'node:fs';
import { checkRegularFile, NotRegularFileError } from '../core/regular-file.js';
import os from 'node:os';
import path from 'node:path';
// Not the package index (start-up time and the daemon's memory): client-node-config.ts says how.
import { KubeConfig } from './client-node-config.js';
import yaml from 'js-yaml';
import { StartupError, errorMessage } from '../core/errors.js';
import { OidcTokenSource } from './oidc.js';
import { TokenFileSource, withTokenSource } from './token-source.js';
import { addExecInfo } from './exec-info.js';
import { runExecPluginsWithoutStdin } from './exec-credential.js';
import { impersonationOf, withImpersonation, type Impersonation } from './impersonation.js';

export interface LoadedKubeConfig {
  kc: KubeConfig;
  context: string;
  namespace: string;
  server: string;
  /** The user's `tokenFile`, absolute, when it has one (managed daemons keep reading it). */
  tokenFile?: string;
  /** Impersonation beyond `as` (client-node keeps only `as`), for managed daemons' kubeconfigs. */
  impersonation?: Impersonation;
}

/**
 * Loads the kubeconfig the way kubectl does (--kubeconfig, else $KUBECONFIG, else ~/.kube/config)
 * through client-node, so every auth method it knows (tokens, client certs, exec plugins,
 * proxy-url) works unchanged; where client-node falls short of kubectl we fill in (OIDC refresh,
 * tokenFile, exec info, impersonation groups). Fails with a one-line StartupError instead of
 * falling back to client-node's silent "localhost:8080" default.
 */
export function loadKubeConfig(opts: { kubeconfig?: string; context?: string; namespace?: string }): LoadedKubeConfig {
  const kc = new KubeConfig();
  try {
    if (opts.kubeconfig) {
      if (!existsSync(opts.kubeconfig)) throw new StartupError(`kubeconfig ${opts.kubeconfig} does not exist`);
      // client-node reads it synchronously: a FIFO would block the whole process (core/regular-file.ts).
      checkRegularFile(opts.kubeconfig);
      kc.loadFromFile(opts.kubeconfig);
    } else {
      const envFiles = (process.env.KUBECONFIG ?? '').split(process.platform === 'win32' ? ';' : ':').filter(Boolean);
      if (envFiles.length > 0 && !envFiles.some((f) => existsSync(f))) {
        throw new StartupError(`no kubeconfig file from KUBECONFIG exists (${envFiles.join(', ')})`);
      }
      for (const f of envFiles.length > 0 ? envFiles.filter((x) => existsSync(x)) : kubeconfigFiles(undefined).filter((x) => existsSync(x)))
        checkRegularFile(f);
      kc.loadFromDefault();
    }
  } catch (err) {
    if (err instanceof StartupError) throw err;
    if (err instanceof NotRegularFileError) throw new StartupError(`cannot load kubeconfig: ${err.message}`, { cause: err });
    throw new StartupError(`cannot load kubeconfig: ${errorMessage(err).split('\n')[0]}`, { cause: err });
  }
  if (kc.getContexts().length === 0 || isClientNodeFallback(kc)) {
    throw new StartupError('no kubeconfig found: pass --kubeconfig, set KUBECONFIG, or create ~/.kube/config');
  }
  if (opts.context) {
    if (!kc.getContextObject(opts.context)) {
      const known = kc
        .getContexts()
        .map((c) => c.name)
        .join(', ');
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
  runExecPluginsWithoutStdin(kc);
  // What client-node drops from the user entry (tokenFile, as-groups, …) we read from the file.
  const raw = findRawUser(kubeconfigFiles(opts.kubeconfig), ctx.user);
  if (raw) resolveExecCommand(kc, raw.file);
  const impersonation = impersonationOf(raw?.user);
  const provider = kc.getCurrentUser()!.authProvider;
  const oidc = provider?.name === 'oidc' && provider.config ? new OidcTokenSource(provider.config as Record<string, string>) : undefined;
  const tokenFile = oidc ? undefined : tokenFileOf(raw);
  const source = oidc ?? (tokenFile ? new TokenFileSource(tokenFile) : undefined);
  const credentialed = source ? withTokenSource(kc, source) : kc;
  return { kc: withImpersonation(credentialed, impersonation), context, namespace, server: cluster.server, tokenFile, impersonation };
}

/** The files kubectl would read, in order (the first to define a user wins). */
function kubeconfigFiles(explicit: string | undefined): string[] {
  if (explicit) return [explicit];
  const env = (process.env.KUBECONFIG ?? '').split(path.delimiter).filter(Boolean);
  return env.length > 0 ? env.filter((f) => existsSync(f)) : [path.join(os.homedir(), '.kube', 'config')];
}

/** The current user's entry as written in the first kubeconfig file that defines it, and that file. */
function findRawUser(files: string[], userName: string): { user: Record<string, unknown>; file: string } | undefined {
  for (const file of files) {
    let doc: unknown;
    try {
      doc = yaml.load(readFileSync(file, 'utf8'));
    } catch {
      continue; // client-node loaded it already; a file it could not parse is its error to report
    }
    const users = (doc as { users?: Array<{ name?: string; user?: Record<string, unknown> }> } | undefined)?.users;
    const entry = Array.isArray(users) ? users.find((u) => u?.name === userName) : undefined;
    if (entry) return { user: entry.user ?? {}, file };
  }
  return undefined;
}

/**
 * client-node drops a user's `tokenFile` (it knows only a non-standard `token-file`), so we take
 * it from the file ourselves: absolute, or relative to the kubeconfig that names it (client-go
 * resolves paths that way). `token-file` is taken too, to read it the way client-go would.
 */
function tokenFileOf(raw: { user: Record<string, unknown>; file: string } | undefined): string | undefined {
  const value = raw?.user.tokenFile ?? raw?.user['token-file'];
  return raw && typeof value === 'string' && value ? path.resolve(path.dirname(raw.file), value) : undefined;
}

/**
 * client-go (tools/clientcmd/loader.go, GetAuthInfoFileReferences + ResolvePaths) resolves an
 * exec plugin `command` that contains a path separator against the directory of the kubeconfig
 * file that defines it; a bare name stays a PATH look-up. client-node spawns it as written, so
 * `./cred.sh` would run from the working directory — whatever that directory holds, and a managed
 * daemon would keep running it from there. We make it absolute first, as kubectl does.
 */
function resolveExecCommand(kc: KubeConfig, file: string): void {
  const exec = kc.getCurrentUser()?.exec as { command?: string } | undefined;
  const command = exec?.command;
  if (!exec || !command || !command.includes(path.sep) || path.isAbsolute(command)) return;
  exec.command = path.join(path.dirname(path.resolve(file)), command);
}

/** client-node invents a "loaded-context" at http://localhost:8080 when it finds nothing at all. */
function isClientNodeFallback(kc: KubeConfig): boolean {
  const cluster = kc.getCurrentCluster();
  return kc.getCurrentContext() === 'loaded-context' && cluster?.server === 'http://localhost:8080';
}
