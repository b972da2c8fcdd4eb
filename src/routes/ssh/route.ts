// The ssh route (`kind: ssh`, `ssh: {host: NAME}`): streams leave through NAME, reached the way
// `ssh NAME` reaches it from ~/.ssh/config (ProxyJump chains, ProxyCommand). The destination goes
// to the last hop as the client wrote it, so names are resolved there (socks5h semantics), never
// here. start() reads the config and the keys, so a config we cannot follow fails at start, and
// begins the SSH connection, which is kept (ssh/connection.ts).
import type { Logger } from '../../core/log.js';
import type { OpenRequest, OpenedStream } from '../../core/types.js';
import { RouteConfigError, StartupError, errorMessage } from '../../core/errors.js';
import { formatHostPort } from '../../core/address.js';
import { loadCredentials } from '../../ssh/auth.js';
import { loadSsh2, ssh2Loaded } from '../../ssh/ssh2-lib.js';
import { resolveChain, type SshHop } from '../../ssh/chain.js';
import { SshConfigError, SshConfigFile, type ReadOptions } from '../../ssh/config.js';
import { SshChainConnection, type ChainOptions, type ChainStatus } from '../../ssh/connection.js';
import type { Route, RouteStatus } from '../route.js';
import type { RouteClaim } from '../route.js';
import type { SshRouteSpec } from '../../routes/spec.js';

/** How long the chain gets to answer after a pause, as a cluster route's tunnels (routes/cluster/route.ts). */
const CHECK_AFTER_PAUSE_MS = 3_000;

export interface SshRouteOptions extends ChainOptions {
  /** Where ~/.ssh/config is, and the home for "~" (tests pass their own). */
  sshConfig?: ReadOptions;
  /** $SSH_AUTH_SOCK (the process's by default). */
  authSock?: string;
  log?: Logger;
  /** start() waits for the first login and fails with it (a start-up check); otherwise it only begins it. */
  connectOnStart?: boolean;
}

export class SshRoute implements Route {
  readonly kind = 'ssh';
  readonly name: string;
  private connection: SshChainConnection | undefined;
  private startError: string | undefined;
  private closed = false;

  constructor(
    private readonly spec: SshRouteSpec,
    private readonly options: SshRouteOptions = {},
  ) {
    this.name = spec.name;
  }

  /** The hops, resolved at start (undefined before). */
  get hops(): readonly SshHop[] | undefined {
    return this.connection?.hops;
  }

  /** The chain's own status (undefined before start): doctor reads how far a login got. */
  chainStatus(): ChainStatus | undefined {
    return this.connection?.status();
  }

  /** ssh2 is loaded only for a table with ssh routes (src/ssh/ssh2-lib.ts). */
  async prepare(): Promise<void> {
    await loadSsh2();
  }

  async start(): Promise<void> {
    if (!ssh2Loaded()) await loadSsh2();
    try {
      const config = new SshConfigFile(this.options.sshConfig);
      const hops = resolveChain(config, this.spec.ssh.host, { authSock: this.options.authSock });
      for (const hop of hops) loadCredentials(hop);
      this.connection = new SshChainConnection(hops, this.options);
    } catch (err) {
      this.startError = errorMessage(err);
      // ~/.ssh/config or the keys cannot be used as written: a configuration error, not an outage.
      const Kind = err instanceof SshConfigError ? RouteConfigError : StartupError;
      throw new Kind(`route ${this.name} (${this.spec.origin}): ssh ${this.spec.ssh.host}: ${this.startError}`, { cause: err });
    }
    // Connecting now, not at first use: the route's state says within seconds whether the chain
    // logs in, instead of "ready" for a chain never tried. A failure is retried in the background.
    const first = this.connection.connect();
    if (this.options.connectOnStart) await first;
    else first.catch(() => undefined);
  }

  /** A stream to the destination as the client wrote it, opened by the chain's last hop. */
  async open(request: OpenRequest, _claim: RouteClaim, signal: AbortSignal): Promise<OpenedStream> {
    const stream = await this.carry(request.destination.host, request.destination.port, signal);
    // A channel EOF is a shutdown(SHUT_WR) on the last hop's socket (RFC 4254 §5.3): TCP's half-close.
    return { stream, via: `ssh ${this.connection!.describe()} ${formatHostPort(request.destination.host, request.destination.port)}`, tcpHalfClose: true };
  }

  /**
   * A Duplex to host:port through the chain, like net.connect but opened by the last hop: what a
   * cluster route riding this route (`via`) uses for its API connection.
   */
  carry(host: string, port: number, signal: AbortSignal): ReturnType<SshChainConnection['dial']> {
    if (!this.connection) return Promise.reject(new StartupError(`route ${this.name} is not started${this.startError ? `: ${this.startError}` : ''}`));
    return this.connection.dial(host, port, signal);
  }

  /** After a pause (core/pause-detector.ts) the kept connection must answer within 3 s, or it is opened again. */
  afterPause(): void {
    this.connection?.afterPause(CHECK_AFTER_PAUSE_MS);
  }

  status(): RouteStatus {
    const base = { name: this.name, kind: this.kind };
    if (this.closed) return { ...base, state: 'error', reason: 'closed' };
    if (this.startError) return { ...base, state: 'error', reason: this.startError };
    if (!this.connection) return { ...base, state: 'starting' };
    const s = this.connection.status();
    // Ready while the chain is logged in; starting until its first login (streams wait for it);
    // degraded from a failure until a login succeeds. A chain that is down (backing off) fails
    // each new stream at once with the hop's error until its next attempt.
    const down = s.state === 'down';
    const failing = s.lastError !== undefined && s.state !== 'up';
    return {
      ...base,
      state: failing ? 'degraded' : s.state === 'up' ? 'ready' : 'starting',
      ...(failing ? { reason: s.lastError } : {}),
      ...(down ? { condition: 'down' as const } : {}),
      ...(failing && s.failingSince !== undefined ? { since: new Date(s.failingSince).toISOString() } : {}),
      details: { chain: s.chain, connection: s.state, channels: s.channels, connects: s.connects },
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.connection?.close();
  }
}
