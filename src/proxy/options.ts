import type { LogLevel } from '../core/log.js';
import type { ProxyCredentials } from '../auth/credentials.js';
import type { TransportMode } from '../tunnel/negotiate.js';
import type { RoutingTable } from '../routing/table-spec.js';
import type { PageHub } from '../ui/page-server.js';

/** Everything the foreground proxy and the daemon are started with. */
export interface ProxyOptions {
  /** "host:port" for the SOCKS5/SOCKS4 listener, or undefined for none. */
  listenSocks?: string;
  /** "host:port" for the HTTP proxy listener (CONNECT and absolute-form), or undefined for none. */
  listenHttp?: string;
  /** --forward [ADDR:]LPORT=TARGET:PORT, repeatable: a plain TCP listener per mapping (loopback only). */
  forwards?: string[];
  kubeconfig?: string;
  /** One --context (older callers); `contexts` wins when given. */
  context?: string;
  /** --context, repeatable: a cluster route per context, the first the default. */
  contexts?: string[];
  /** --config FILE: the routing table file (else config.yaml in the config directory, when no --context). */
  config?: string;
  /** Without --config: the default config file, as the shell that connected found it (a reload elsewhere reads the same one). */
  defaultConfig?: string;
  /** --direct / --no-direct: destinations no route claims are dialled from this machine. */
  direct?: boolean;
  /** Direct pass-through when neither the flags nor the config file say (exec's temporary proxy). */
  directByDefault?: boolean;
  /** --extra-ca FILE (absolute): a PEM bundle trusted for API connections besides the kubeconfig's CA. */
  extraCA?: string;
  /** The context to serve when the table names none, instead of the kubeconfig's current one (a reload keeps the one served). */
  currentContext?: string;
  /** A table already resolved (managed daemons get theirs from `connect`); wins over the above. */
  table?: RoutingTable;
  /** Per cluster route name: the kubeconfig to load it from instead of --kubeconfig. */
  routeKubeconfigs?: Record<string, string>;
  /** Namespace for short names; defaults to the context's namespace, else "default". */
  namespace?: string;
  clusterDomain: string;
  logLevel: LogLevel;
  /** Resolve + open a stream within this time, else the client gets a timeout reply. */
  connectTimeoutMs: number;
  /** Clients must complete their SOCKS/HTTP request head within this time. */
  handshakeTimeoutMs: number;
  /** On SIGINT/SIGTERM, open streams get this long to finish. */
  shutdownGraceMs: number;
  /** Ping every port-forward tunnel this often (0 = off); undefined = DEFAULTS. */
  keepaliveMs?: number;
  /** A tunnel that answers nothing this long after a ping is closed, with its client. */
  keepaliveTimeoutMs?: number;
  /** Concurrent streams beyond this are refused (SOCKS 0x01 / HTTP 503); 0 = no limit. */
  maxStreams?: number;
  /** Credentials clients must present; required when a listener is not on loopback. */
  proxyAuth?: ProxyCredentials;
  /** Port-forward transport: one SPDY tunnel per pod, one WebSocket per stream, or auto (default). */
  transport?: TransportMode;
  /** Pod-IP targets may reach hostNetwork pods (ports on the node itself); Services work regardless. */
  allowHostNetworkPods?: boolean;
  /**
   * The caller checked the API server with these credentials a moment ago (a managed daemon:
   * `connect` did, just before starting it), so start-up skips that round trip; a failure still
   * surfaces when the cache lists.
   */
  apiChecked?: boolean;
  /** Serve the live page at / on the HTTP listener (a foreground proxy; its URL, with a token, is in the ready lines). */
  page?: boolean;
  /** What else that page shows beside this proxy: the user's managed proxies (`serve` passes managed/ui.ts's hub). */
  otherProxies?: PageHub;
}

export const DEFAULTS = {
  listenSocks: '127.0.0.1:1080',
  clusterDomain: 'cluster.local',
  logLevel: 'info',
  connectTimeoutMs: 15_000,
  handshakeTimeoutMs: 10_000,
  shutdownGraceMs: 5_000,
  keepaliveMs: 10_000,
  keepaliveTimeoutMs: 15_000,
  maxStreams: 1024,
  transport: 'auto',
  allowHostNetworkPods: false,
} as const;
