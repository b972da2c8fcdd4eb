// What the service runs: this CLI (the file service/executable.ts chooses) as the
// foreground proxy with the user's flags, every path made absolute now (a service starts in
// another directory), JSON log lines appended to <state dir>/logs/NAME.log.
import path from 'node:path';
import type { ServiceSpec } from './units.js';
import { UNIX_PREFIX, unixListenPath } from '../core/address.js';
import { expandHome, unixSocketPath } from '../state/paths.js';
import { parseDuration } from '../core/duration.js';

/** Flags of the foreground proxy the unit carries as given (values that name no file). */
export const SERVICE_PASSED_FLAGS = [
  'connect-timeout',
  'handshake-timeout',
  'shutdown-grace',
  'keepalive',
  'keepalive-timeout',
  'max-streams',
  'transport',
  'allow-host-network-pods',
] as const;

/** Variables cloud CLIs' exec credential plugins read to pick a profile, region or config directory; none holds a secret. */
export const PLUGIN_VARIABLES = [
  'AWS_PROFILE',
  'AWS_DEFAULT_PROFILE',
  'AWS_REGION',
  'AWS_DEFAULT_REGION',
  'AWS_CONFIG_FILE',
  'AWS_SHARED_CREDENTIALS_FILE',
  'CLOUDSDK_CONFIG',
  'CLOUDSDK_ACTIVE_CONFIG_NAME',
  'CLOUDSDK_CORE_PROJECT',
  'GOOGLE_APPLICATION_CREDENTIALS',
  'AZURE_CONFIG_DIR',
] as const;

export interface ServiceFlags {
  'connect-timeout'?: string;
  'handshake-timeout'?: string;
  'shutdown-grace'?: string;
  keepalive?: string;
  'keepalive-timeout'?: string;
  'max-streams'?: number;
  transport?: string;
  'allow-host-network-pods'?: boolean;
  kubeconfig?: string;
  context?: string[];
  config?: string;
  'extra-ca'?: string;
  direct?: boolean;
  'cluster-domain'?: string;
  forward?: string[];
  namespace?: string;
  'listen-socks'?: string;
  'listen-http'?: string;
  'proxy-auth-file'?: string;
  'log-level'?: string;
}

export interface SpecInput {
  name: string;
  flags: ServiceFlags;
  invocation: { command: string; args: string[] };
  stateRoot: string;
  env: NodeJS.ProcessEnv;
  cwd: string;
  home: string;
}

export function serviceSpec(i: SpecInput): ServiceSpec {
  const abs = (p: string) => path.resolve(i.cwd, p);
  const f = i.flags;
  const args: string[] = [];
  if (f.kubeconfig) args.push('--kubeconfig', abs(f.kubeconfig));
  for (const c of f.context ?? []) args.push('--context', c);
  if (f.config) args.push('--config', abs(f.config));
  if (f['extra-ca']) args.push('--extra-ca', abs(f['extra-ca']));
  if (f.direct !== undefined) args.push(f.direct ? '--direct' : '--no-direct');
  if (f['cluster-domain']) args.push('--cluster-domain', f['cluster-domain']);
  for (const m of f.forward ?? []) args.push('--forward', m);
  if (f.namespace) args.push('--namespace', f.namespace);
  // Every unix socket path is fixed now, where the user will look for it: unix:PATH with a
  // directory is a path like the others (from the working directory); unix: and unix:NAME are in
  // the state directory, or under $TMPDIR when a URL cannot name that (state/paths.ts socketDir) —
  // and a service manager may give the service another TMPDIR, or none.
  const listen = (v: string, kind: 'socks' | 'http') => {
    const unix = unixListenPath(v);
    if (unix === undefined) return v;
    return `${UNIX_PREFIX}${unix.includes('/') ? abs(expandHome(unix, i.home)) : unixSocketPath(unix, kind, i.stateRoot)}`;
  };
  if (f['listen-socks']) args.push('--listen-socks', listen(f['listen-socks'], 'socks'));
  if (f['listen-http']) args.push('--listen-http', listen(f['listen-http'], 'http'));
  if (f['proxy-auth-file']) args.push('--proxy-auth-file', abs(f['proxy-auth-file']));
  if (f['log-level']) args.push('--log-level', f['log-level']);
  for (const name of SERVICE_PASSED_FLAGS) {
    const value = f[name];
    if (value === undefined || value === false) continue;
    args.push(`--${name}`, ...(value === true ? [] : [String(value)]));
  }
  args.push('--log-format', 'json');

  const env: Record<string, string> = {};
  // Exec credential plugins (aws, gke-gcloud-auth-plugin, kubelogin) are found on PATH; a
  // service manager's own PATH is minimal, so the installing shell's is kept.
  if (i.env.PATH) env.PATH = i.env.PATH;
  // What those plugins read to choose a profile or configuration (no secrets): `aws eks get-token`
  // under the shell's AWS_PROFILE is another IAM identity than under the default profile.
  for (const name of PLUGIN_VARIABLES) if (i.env[name]) env[name] = i.env[name];
  if (!f.kubeconfig && i.env.KUBECONFIG) {
    env.KUBECONFIG = i.env.KUBECONFIG.split(path.delimiter).filter(Boolean).map(abs).join(path.delimiter);
  }
  env.KUBECTL_PROXYOUT_STATE_DIR = i.stateRoot;
  // Without --config the proxy reads config.yaml in the config directory at each start, which
  // env-paths finds from $XDG_CONFIG_HOME on Linux: the service reads the file this shell would.
  if (i.env.XDG_CONFIG_HOME && path.isAbsolute(i.env.XDG_CONFIG_HOME)) env.XDG_CONFIG_HOME = i.env.XDG_CONFIG_HOME;
  Object.assign(env, egressEnvironment(i.env).kept);
  const where = f.context?.length ? `context ${f.context.join(', ')}` : f.config ? `routes of ${path.basename(f.config)}` : 'current context';
  return {
    name: i.name,
    command: i.invocation.command,
    args: [...i.invocation.args, ...args],
    logFile: path.join(i.stateRoot, 'logs', `${i.name}.log`),
    workingDirectory: i.home,
    env,
    description: `kubectl-proxyout: SOCKS5/HTTP proxy into Kubernetes (${where})`,
    // The drain the proxy was asked to give open connections, and 10 s to close and exit after it.
    ...(f['shutdown-grace'] !== undefined ? { stopTimeoutSec: Math.ceil(parseDuration(f['shutdown-grace']) / 1000) + 10 } : {}),
  };
}

/** The variables the API connections read for a corporate proxy (cluster/egress-proxy.ts), as the proxy reads them. */
const EGRESS_VARIABLES = ['HTTPS_PROXY', 'https_proxy', 'HTTP_PROXY', 'http_proxy', 'NO_PROXY', 'no_proxy'] as const;

/**
 * The installing shell's proxy variables the service gets, so it reaches API servers as `connect`
 * did from that shell (a service manager's environment has none of a shell's exports). One with a
 * user and password is withheld: the service file is readable by every local user.
 */
export function egressEnvironment(env: NodeJS.ProcessEnv): { kept: Record<string, string>; withheld: string[] } {
  const kept: Record<string, string> = {};
  const withheld: string[] = [];
  for (const name of EGRESS_VARIABLES) {
    const value = env[name];
    if (!value) continue;
    if (!/^no_proxy$/i.test(name) && hasUserinfo(value)) withheld.push(name);
    else kept[name] = value;
  }
  return { kept, withheld };
}

function hasUserinfo(value: string): boolean {
  try {
    const u = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(value) ? value : `http://${value}`);
    return u.username !== '' || u.password !== '';
  } catch {
    return value.includes('@');
  }
}
