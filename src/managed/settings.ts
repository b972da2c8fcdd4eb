// `connect` for an ID that is already running reports that proxy — unless the caller asked, by
// flag, for settings the running one does not have. Printing "already running" with another
// listener or transport than the one asked for would be a silent surprise, so that is an error
// naming each difference. Only flags given explicitly count: a plain `connect` after
// `connect --listen-socks 127.0.0.1:0` is the same request, not a different one. Another cluster
// view, or the same one as another identity, under the ID is an error too.
import { StartupError } from '../core/errors.js';
import path from 'node:path';
import { escapeControls } from '../core/escape.js';
import { describeTarget, type CredentialIdentity, type DaemonOptions, type ProxyEntry } from './store.js';
import { DEFAULTS } from '../proxy/options.js';
import { formatHostPort, parseListenAddress } from '../core/address.js';
import { normalizeIp } from '../core/ip.js';

/** Flag → the DaemonOptions field it sets. */
export const FLAG_OPTIONS: Readonly<Record<string, keyof typeof DEFAULTS | 'listenHttp' | 'forwards'>> = {
  'listen-socks': 'listenSocks',
  'listen-http': 'listenHttp',
  forward: 'forwards',
  'cluster-domain': 'clusterDomain',
  'log-level': 'logLevel',
  'connect-timeout': 'connectTimeoutMs',
  'handshake-timeout': 'handshakeTimeoutMs',
  'shutdown-grace': 'shutdownGraceMs',
  keepalive: 'keepaliveMs',
  'keepalive-timeout': 'keepaliveTimeoutMs',
  'max-streams': 'maxStreams',
  transport: 'transport',
  'allow-host-network-pods': 'allowHostNetworkPods',
};

export interface RequestedSettings {
  options: DaemonOptions;
  /** Flags given on the command line (not defaults). */
  explicitFlags: ReadonlySet<string>;
  /** The proxy user asked for, if any (passwords are never stored, so only the user is compared). */
  proxyAuthUser?: string;
  /** `--no-proxy-auth`: the caller asked for a proxy without credentials. */
  proxyAuthOff?: boolean;
}

const shown = (v: unknown) => (v === undefined ? 'off' : Array.isArray(v) ? v.join(' ') : String(v));

/** Each explicitly requested setting the running proxy does not have, as "--flag (running: x, asked: y)". */
export function settingDifferences(entry: ProxyEntry, req: RequestedSettings): string[] {
  const out: string[] = [];
  for (const [flag, key] of Object.entries(FLAG_OPTIONS)) {
    if (!req.explicitFlags.has(flag)) continue;
    // Entries written before a flag existed ran with its default.
    const running = entry.options[key] ?? (key === 'listenSocks' || key === 'listenHttp' || key === 'forwards' ? undefined : DEFAULTS[key]);
    const asked = req.options[key];
    // Lists (--forward) compare by content, in order; a listen address by what it binds.
    const same = key === 'listenSocks' || key === 'listenHttp' ? listenKey(running) === listenKey(asked) : JSON.stringify(running) === JSON.stringify(asked);
    if (!same) out.push(`--${flag} (running: ${shown(running)}, asked: ${shown(asked)})`);
  }
  if (req.proxyAuthUser !== undefined && entry.proxyAuthUser !== req.proxyAuthUser) {
    out.push(`proxy authentication (running: ${entry.proxyAuthUser === undefined ? 'off' : `user ${entry.proxyAuthUser}`}, asked: user ${req.proxyAuthUser})`);
  }
  if (req.proxyAuthOff && entry.proxyAuthUser !== undefined) {
    out.push(`proxy authentication (running: user ${entry.proxyAuthUser}, asked: off with --no-proxy-auth)`);
  }
  return out;
}

/** A listen address as it binds: "[0:0::1]:1080" is "[::1]:1080", ":1080" is "127.0.0.1:1080"; other text as it is. */
function listenKey(v: unknown): string {
  if (typeof v !== 'string') return JSON.stringify(v);
  try {
    const { host, port } = parseListenAddress(v);
    return formatHostPort(normalizeIp(host), port);
  } catch {
    return v; // unix:PATH, off
  }
}

export function assertSameSettings(entry: ProxyEntry, req: RequestedSettings): ProxyEntry {
  const diffs = settingDifferences(entry, req);
  if (diffs.length === 0) return entry;
  throw new StartupError(
    `proxy ${entry.id} is already running with other settings: ${diffs.join('; ')}. ` +
      `Disconnect it first (kubectl proxyout disconnect ${entry.id}) or choose another --id`,
  );
}

/** Whose credentials a proxy uses, for messages: the kubeconfig user and the files it came from. */
export function whose(c: CredentialIdentity): string {
  return `kubeconfig user "${escapeControls(c.user)}" from ${c.files.join(path.delimiter) || 'no file'}`;
}

export type Target = Pick<ProxyEntry, 'server' | 'context' | 'namespace' | 'credentials'>;

/** An explicit --id already used for another cluster view is an error, not "already running". */
export function assertSameTarget(entry: ProxyEntry, target: Target): ProxyEntry {
  if (entry.server !== target.server || entry.context !== target.context || entry.namespace !== target.namespace) {
    throw new StartupError(
      `ID ${entry.id} is already used by the proxy for ${describeTarget(entry)}; ` +
        `disconnect it first (kubectl proxyout disconnect ${entry.id}) or choose another --id`,
    );
  }
  // The same context name and server in another kubeconfig may be another identity (another
  // role, another user): "already running" would hand over the first one's rights.
  const [was, now] = [entry.credentials, target.credentials];
  if (was && now && was.key !== now.key) {
    throw new StartupError(
      `ID ${entry.id} is already used by the proxy for ${describeTarget(entry)} with other credentials (${whose(was)}; this connect: ${whose(now)}); ` +
        `disconnect it first (kubectl proxyout disconnect ${entry.id}) or choose another --id`,
    );
  }
  return entry;
}
