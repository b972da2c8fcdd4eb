// Flag definitions shared by the foreground proxy (`serve`) and `connect`, so both parse and
// document them the same way.
import path from 'node:path';
import { Errors, Flags } from '@oclif/core';
import { formatDuration, parseDuration } from '../core/duration.js';
import { LOG_LEVELS, type LogLevel } from '../core/log.js';
import { DEFAULTS, type ProxyOptions } from '../proxy/options.js';
import { StartupError } from '../core/errors.js';
import { resolveCredentials, type ProxyCredentials } from '../auth/credentials.js';
import { TRANSPORT_MODES, type TransportMode } from '../tunnel/negotiate.js';
import { clusterDomainFrom, tableFlagDefinitions } from './table-flags.js';
import { isNamespaceName } from '../routes/guest-cluster/names.js';

// A string flag, not a custom<number>: its default then shows as "15s" from the static
// manifest, where a computed defaultHelp would make oclif import this module (and the whole
// proxy core) just to print help.
/**
 * -n NS: a name the API server could have (kubectl leaves that to the server; a proxy would serve
 * short names in a namespace that cannot exist, and find none).
 */
export function namespaceFlag(summary: string) {
  return Flags.string({
    char: 'n',
    summary,
    helpValue: '<ns>',
    parse: async (input) => {
      if (!isNamespaceName(input))
        throw new Errors.CLIError(`"${input}" cannot name a namespace: lowercase letters, digits and "-", at most 63, a letter or digit at each end`);
      return input;
    },
  });
}

export function durationFlag(summary: string, defaultMs: number, allowZero: boolean, oldNames: string[] = []) {
  return Flags.string({
    summary,
    // Old spellings still parse, with oclif's deprecation warning naming the new one.
    ...(oldNames.length > 0 ? { aliases: oldNames, deprecateAliases: true } : {}),
    helpValue: '<duration>',
    default: formatDuration(defaultMs),
    async parse(input) {
      // A CLIError is a usage error to main.ts: one line, exit 2, no stack.
      let ms: number;
      try {
        ms = parseDuration(input);
      } catch (err) {
        throw new Errors.CLIError(err instanceof Error ? err.message : String(err), { exit: 2 });
      }
      if (ms === 0 && !allowZero) throw new Errors.CLIError('must be greater than 0', { exit: 2 });
      return input;
    },
  });
}

/** A listener flag value that turns the listener off. */
export const OFF = 'off';

/**
 * The flags every proxy-starting command takes (`serve`, `connect`): where to listen, which
 * cluster, and the timeouts. Every command has the same defaults; only the summaries say where
 * the log goes and what the grace waits for.
 */
export function proxyFlags(logSummary: string, graceSummary: string) {
  return {
    'listen-socks': Flags.string({
      summary: `SOCKS5 listen address host:port or unix:PATH ("${OFF}" for none; port 0 picks a free one; unix: alone is a socket in the state directory, or under $TMPDIR when a URL cannot name that path as it is).`,
      helpValue: '<addr>',
      default: DEFAULTS.listenSocks,
    }),
    'listen-http': Flags.string({ summary: `HTTP proxy listen address host:port or unix:PATH (none unless given; "${OFF}" for none).`, helpValue: '<addr>' }),
    forward: Flags.string({
      summary:
        'Port mapping [ADDR:]LPORT=TARGET:PORT: a plain TCP port on loopback (ADDR 127.0.0.1, LPORT 0 = a free one) whose connections go to TARGET as a SOCKS CONNECT would. Repeatable. Config key: forward.',
      helpValue: '<map>',
      multiple: true,
      multipleNonGreedy: true,
    }),
    kubeconfig: Flags.string({ summary: 'Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).', helpValue: '<file>' }),
    ...tableFlagDefinitions(),
    namespace: namespaceFlag("Namespace for short names (default: the default route's context namespace)."),
    'cluster-domain': Flags.string({ summary: 'Cluster DNS domain.', helpValue: '<domain>', default: DEFAULTS.clusterDomain }),
    'log-level': Flags.option({ options: LOG_LEVELS, default: DEFAULTS.logLevel, helpValue: '<level>', summary: logSummary })(),
    'connect-timeout': durationFlag('Time to resolve a target and open its stream.', DEFAULTS.connectTimeoutMs, false),
    'handshake-timeout': durationFlag('Time a client has to send its SOCKS/HTTP request.', DEFAULTS.handshakeTimeoutMs, false),
    'shutdown-grace': durationFlag(graceSummary, DEFAULTS.shutdownGraceMs, true),
    keepalive: durationFlag('Ping each port-forward tunnel this often, so idle streams stay up and dead ones are found (0 = off).', DEFAULTS.keepaliveMs, true),
    'keepalive-timeout': durationFlag(
      'Close a tunnel (and its client connection) that answers nothing this long after a ping.',
      DEFAULTS.keepaliveTimeoutMs,
      false,
    ),
    'max-streams': Flags.integer({
      summary: 'Concurrent streams; more are refused (SOCKS 0x01, HTTP 503). 0 = no limit.',
      helpValue: '<n>',
      default: DEFAULTS.maxStreams,
      min: 0,
    }),
    'proxy-auth-file': Flags.string({
      summary: 'Require proxy credentials: a file (chmod 600) whose first line is user:password. Also: $KUBECTL_PROXYOUT_PROXY_AUTH.',
      helpValue: '<file>',
      exclusive: ['proxy-auth'],
    }),
    'proxy-auth': Flags.string({
      summary: 'Require proxy credentials user:password (visible in ps: prefer --proxy-auth-file).',
      helpValue: '<user:password>',
      exclusive: ['proxy-auth-file'],
    }),
    'allow-host-network-pods': Flags.boolean({
      summary:
        "Let Pod-IP targets reach hostNetwork pods, whose IP is the node's: ports on the node itself (kubelet, etcd, sshd). Services backed by such pods work without it.",
    }),
    transport: Flags.option({
      options: TRANSPORT_MODES,
      default: DEFAULTS.transport,
      helpValue: '<mode>',
      summary: 'Port-forward transport: spdy (one multiplexed tunnel per pod), websocket (one WebSocket per connection), or auto (spdy, else websocket).',
    })(),
  };
}

/** Proxy credentials from the flags or $KUBECTL_PROXYOUT_PROXY_AUTH; a one-line error (exit 1) when unusable. */
export function proxyAuthFrom(
  flags: { 'proxy-auth-file'?: string; 'proxy-auth'?: string },
  env: NodeJS.ProcessEnv = process.env,
): ProxyCredentials | undefined {
  try {
    return resolveCredentials({ file: flags['proxy-auth-file'], inline: flags['proxy-auth'] }, env);
  } catch (err) {
    if (err instanceof StartupError) throw new Errors.CLIError(err.message, { exit: 1 });
    throw err;
  }
}

type ParsedProxyFlags = {
  [K in keyof ReturnType<typeof proxyFlags>]: K extends
    'listen-socks' | 'cluster-domain' | 'log-level' | 'connect-timeout' | 'handshake-timeout' | 'shutdown-grace'
    ? string
    : K extends 'keepalive' | 'keepalive-timeout'
      ? string
      : K extends 'max-streams'
        ? number
        : K extends 'allow-host-network-pods'
          ? boolean
          : K extends 'context' | 'forward'
            ? string[] | undefined
            : K extends 'direct'
              ? boolean | undefined
              : string | undefined;
};

/** ProxyOptions from parsed proxyFlags; a usage error when both listeners are off. */
export function proxyOptionsFrom(flags: ParsedProxyFlags): ProxyOptions {
  const listenSocks = flags['listen-socks'] === OFF ? undefined : flags['listen-socks'];
  const listenHttp = flags['listen-http'] === OFF ? undefined : flags['listen-http'];
  // A config file may still bring port mappings (`forward:`); startProxy says so if it does not.
  if (listenSocks === undefined && listenHttp === undefined && !flags.forward?.length && flags.config === undefined) {
    throw new Errors.CLIError('nothing to listen on: --listen-socks is off and neither --listen-http nor --forward is given', { exit: 2 });
  }
  return {
    listenSocks,
    listenHttp,
    ...(flags.forward?.length ? { forwards: flags.forward } : {}),
    kubeconfig: flags.kubeconfig,
    contexts: flags.context ?? [],
    config: flags.config,
    direct: flags.direct,
    // Made absolute here: a managed daemon reads it from another working directory.
    ...(flags['extra-ca'] !== undefined ? { extraCA: path.resolve(flags['extra-ca']) } : {}),
    namespace: flags.namespace,
    clusterDomain: clusterDomainFrom(flags['cluster-domain']),
    logLevel: flags['log-level'] as LogLevel,
    connectTimeoutMs: parseDuration(flags['connect-timeout']),
    handshakeTimeoutMs: parseDuration(flags['handshake-timeout']),
    shutdownGraceMs: parseDuration(flags['shutdown-grace']),
    keepaliveMs: parseDuration(flags.keepalive),
    keepaliveTimeoutMs: parseDuration(flags['keepalive-timeout']),
    maxStreams: flags['max-streams'],
    proxyAuth: proxyAuthFrom(flags),
    transport: (flags.transport ?? DEFAULTS.transport) as TransportMode,
    allowHostNetworkPods: flags['allow-host-network-pods'],
  };
}
