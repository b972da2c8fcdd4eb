// One SSH connection per chain: each hop logged in through a direct-tcpip channel of the one
// before (what `ssh -J` does), opened when the route starts (or at first use) and kept, with
// keepalives (ServerAliveInterval, default 15 s). When any hop drops, the whole chain is down:
// open streams end, and it is opened again in the background with backoff. Every stream is a
// direct-tcpip channel (RFC 4254 §7.2) from the last hop, naming the destination as the client
// wrote it — the far end resolves it.
import { Duplex } from 'node:stream';
import type { Client, ClientChannel } from 'ssh2';
import { abortable } from '../core/abort.js';
import { formatHostPort } from '../core/address.js';
import { ConnectTimeoutError, type ProxyError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { describeHop, type SshHop } from './chain.js';
import { AuthNotices } from './auth.js';
import { closeOnDestroy } from './channel-end.js';
import { channelOpenError, hopError, tagHopFailure } from './failures.js';
import { answersWithin, endHops, HOP_CONNECT_TIMEOUT_MS, login, openChannel, proxyCommandStream } from './hop-login.js';

export type ChainState = 'idle' | 'connecting' | 'up' | 'down' | 'closed';

export interface ChainStatus {
  chain: string;
  state: ChainState;
  channels: number;
  /** Why the last attempt failed or the connection dropped. */
  lastError?: string;
  /** Since when (epoch ms) no attempt has succeeded: set by the first failure, cleared by a login. */
  failingSince?: number;
  connects: number;
  /** Hops logged in, of the connection or the attempt under way (doctor: where a login stalled). */
  loggedIn: number;
}

export interface ChainOptions {
  log?: Logger;
  /** First retry delay after a failure or a drop; doubles up to maxBackoffMs. */
  initialBackoffMs?: number;
  maxBackoffMs?: number;
  /** How long the chain must stay up for a drop to count as a new failure (the backoff resets). */
  stableAfterMs?: number;
  /** How long hops get to close the connection once it is ended (hop-login.ts CLOSE_DEADLINE_MS). */
  closeDeadlineMs?: number;
}

export class SshChainConnection {
  private clients: Client[] = [];
  /** Aborted when the hops in `clients` are torn down, to stop the login still under way. */
  private stopLogins: AbortController | undefined;
  private state: ChainState = 'idle';
  private attempt: Promise<Client> | undefined;
  private lastError: ProxyError | undefined;
  private failingSince: number | undefined;
  private backoffMs: number;
  private retryTimer: NodeJS.Timeout | undefined;
  /** Channels handed out and not yet done (closed, destroyed by their user, or dropped). */
  private readonly channels = new Set<ClientChannel>();
  /** Called when the last channel is done, while close() waits for that. */
  private drained: (() => void) | undefined;
  private closing: Promise<void> | undefined;
  /** Settles when the hop's connection has closed, for each hop logged in. */
  private readonly hopClosed = new WeakMap<Client, Promise<void>>();
  private connects = 0;
  private upSince = 0;
  /** The check after a pause, while it runs: new streams wait for its verdict. */
  private checking: Promise<void> | undefined;
  /** Agents and keys this chain has warned about: each once, not at every reconnect. */
  private readonly notices: AuthNotices;

  constructor(
    readonly hops: SshHop[],
    private readonly options: ChainOptions = {},
  ) {
    if (hops.length === 0) throw new Error('an SSH chain needs at least one hop');
    this.backoffMs = options.initialBackoffMs ?? 500;
    this.notices = new AuthNotices(options.log);
  }

  /** "jump1 → jump2 → target". */
  describe(): string {
    return this.hops.map((h) => h.alias).join(' → ');
  }

  status(): ChainStatus {
    return {
      chain: this.describe(),
      state: this.state,
      channels: this.channels.size,
      lastError: this.lastError?.message,
      ...(this.failingSince !== undefined ? { failingSince: this.failingSince } : {}),
      connects: this.connects,
      loggedIn: this.clients.length,
    };
  }

  /**
   * A byte stream to host:port opened by the last hop (a direct-tcpip channel; a Duplex, usable
   * wherever a net.Socket is: ending it sends EOF, destroying it closes the channel). Rejects with
   * a ProxyError naming the hop that failed.
   */
  async dial(host: string, port: number, signal: AbortSignal): Promise<Duplex> {
    if (this.state === 'closed') throw this.closedError();
    const client = await abortable(this.connection(), signal).catch((err: unknown) => {
      throw abortedError(err, signal, `connecting to ${this.describe()}`);
    });
    const channel = await openChannel(client, host, port, signal).catch((err: unknown) => {
      if (signal.aborted) throw abortedError(err, signal, `opening ${formatHostPort(host, port)} through ${this.describe()}`);
      throw channelOpenError(err, host, port, this.hops.at(-1)!);
    });
    if (signal.aborted) {
      channel.destroy();
      throw abortedError(signal.reason, signal, `opening ${formatHostPort(host, port)} through ${this.describe()}`);
    }
    this.channels.add(channel);
    const done = () => this.channelDone(channel);
    channel.once('close', done);
    // A channel its user destroyed is done at once: nothing more of it is for anyone.
    closeOnDestroy(channel, done);
    return channel;
  }

  /**
   * After a pause (core/pause-detector.ts) the connection may be dead without a sign (a NAT that
   * forgot it, a network change), and the keepalives take up to ServerAliveInterval ×
   * ServerAliveCountMax to notice. The last hop must answer within `checkMs` (its answer crosses
   * every hop); new streams wait for that, and a chain that does not answer is opened again.
   */
  afterPause(checkMs: number): void {
    const clients = this.clients;
    if (this.state !== 'up' || this.checking || clients.length !== this.hops.length) return;
    const check = answersWithin(clients.at(-1)!, checkMs).then((answered) => {
      this.checking = undefined;
      if (answered || this.clients !== clients) return;
      this.options.log?.warn({ chain: this.describe(), checkMs }, 'ssh chain did not answer after the process was paused; connecting again');
      this.dropped(clients, this.hops[0]!, `no answer within ${checkMs} ms after the process was paused`);
    });
    this.checking = check;
  }

  /** Connects now (for a start-up check); resolves once every hop is logged in. */
  async connect(): Promise<void> {
    await this.connection();
  }

  /**
   * Stops taking streams; the connection is closed once the open streams have ended (closed, or
   * destroyed by whoever uses them: their unread data is not waited for).
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.state = 'closed';
      clearTimeout(this.retryTimer);
      if (this.channels.size > 0) await new Promise<void>((resolve) => (this.drained = resolve));
      await this.teardown();
    })();
    return this.closing;
  }

  private channelDone(channel: ClientChannel): void {
    if (this.channels.delete(channel) && this.channels.size === 0) this.drained?.();
  }

  /** The live last-hop client, or the attempt under way, or a new attempt (unless backing off). */
  private connection(): Promise<Client> {
    if (this.state === 'closed') return Promise.reject(this.closedError());
    if (this.checking) return this.checking.then(() => this.connection());
    if (this.state === 'up' && this.clients.length === this.hops.length) return Promise.resolve(this.clients.at(-1)!);
    if (this.attempt) return this.attempt;
    // Backing off after a failure: fail fast with why, rather than hammer a host that is down.
    if (this.lastError && this.retryTimer) return Promise.reject(this.lastError);
    return this.start();
  }

  private start(): Promise<Client> {
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    this.state = 'connecting';
    const attempt = this.open().then(
      (client) => {
        this.attempt = undefined;
        if (this.state === 'closed') {
          void this.teardown();
          throw this.closedError();
        }
        this.state = 'up';
        this.connects++;
        this.lastError = undefined;
        this.failingSince = undefined;
        // The backoff is not reset here but when the chain has held (dropped()): a hop that ends
        // each session right after login would otherwise be logged in to without pause.
        this.upSince = Date.now();
        this.options.log?.info({ chain: this.describe() }, 'ssh chain up');
        return client;
      },
      (err: unknown) => {
        this.attempt = undefined;
        void this.teardown();
        this.failed(err as ProxyError);
        throw err;
      },
    );
    this.attempt = attempt;
    return attempt;
  }

  private failed(err: ProxyError, retryAtOnce = false): void {
    if (this.state === 'closed') return;
    this.state = 'down';
    // Warned once per outage and reason: a host down all day is retried every 30 s, and says so at debug.
    const repeat = this.failingSince !== undefined && this.lastError?.message === err.message;
    this.lastError = err;
    this.failingSince ??= Date.now();
    const fields = { chain: this.describe(), err: err.message, retryInMs: retryAtOnce ? 0 : this.backoffMs };
    if (repeat) this.options.log?.debug(fields, 'ssh chain still down');
    else this.options.log?.warn(fields, 'ssh chain down');
    if (!retryAtOnce) return this.scheduleRetry();
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    this.start().catch(() => undefined);
  }

  /** Keeps the chain: retries in the background, the delay doubling up to maxBackoffMs. */
  private scheduleRetry(): void {
    clearTimeout(this.retryTimer);
    const delay = this.backoffMs;
    this.backoffMs = Math.min(this.backoffMs * 2, this.options.maxBackoffMs ?? 30_000);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      if (this.state === 'down' && !this.attempt) this.start().catch(() => undefined);
    }, delay);
    this.retryTimer.unref();
  }

  /**
   * Logs in to every hop in turn; any hop closing later takes the whole chain down. A teardown
   * while this runs (close(), or a hop already up dropping) gives up the login under way, and
   * ends a login that completed regardless: the hops are no longer anyone's to end.
   */
  private async open(): Promise<Client> {
    const clients: Client[] = [];
    const stop = new AbortController();
    this.clients = clients;
    this.stopLogins = stop;
    for (let i = 0; i < this.hops.length; i++) {
      const hop = this.hops[i]!;
      let sock: Duplex | undefined;
      if (i > 0) {
        // The hop before dials this one: bounded by this hop's ConnectTimeout, as ssh bounds the
        // wait for a ProxyJump hop's banner, which starts before that channel is open.
        const timeoutMs = hop.connectTimeoutMs ?? HOP_CONNECT_TIMEOUT_MS;
        const dialed = AbortSignal.any([stop.signal, AbortSignal.timeout(timeoutMs)]);
        const channel = await openChannel(clients[i - 1]!, hop.hostName, hop.port, dialed).catch((err: unknown) => {
          if (stop.signal.aborted) throw err;
          const reach = `${describeHop(this.hops[i - 1]!)} cannot reach it`;
          if (dialed.aborted) throw tagHopFailure(hopError(new Error('timed out'), hop, `${reach} within ${timeoutMs} ms (ConnectTimeout)`), hop, 'timeout');
          throw hopError(err, hop, reach);
        });
        // This hop's client destroys its transport when the hop stops answering (keepalive) and
        // drops only at the transport's 'close', which must not wait for the hop before to
        // answer our CHANNEL_CLOSE: that one may never come (channel-end.ts).
        closeOnDestroy(channel);
        // EOF from the hop before: this hop's connection is gone (its sshd ended), and SSH cannot
        // go on over a half-closed transport — ssh ends the connection when a read gets EOF
        // (packet.c). Nor would more come: OpenSSH sends CHANNEL_CLOSE only once we write again,
        // and ssh2 stops writing (its keepalives) at EOF, so the chain stayed "up", and dead.
        channel.once('end', () => channel.destroy());
        sock = channel;
      } else if (hop.proxyCommand) {
        sock = proxyCommandStream(hop.proxyCommand, this.options.log);
      }
      const client = await login(hop, sock, stop.signal, this.options.log, this.notices);
      if (stop.signal.aborted) {
        // Logged in just as the chain was torn down.
        client.end();
        throw stop.signal.reason;
      }
      clients.push(client);
      this.hopClosed.set(client, new Promise((resolve) => client.once('close', () => resolve())));
      client.on('close', () => this.dropped(clients, hop));
      client.on('error', (err) => this.options.log?.debug({ hop: hop.alias, err: err.message }, 'ssh hop error'));
    }
    return clients.at(-1)!;
  }

  /** `pauseCheck`: why the check after a pause gave the connection up (it then counts as having held). */
  private dropped(clients: Client[], hop: SshHop, pauseCheck?: string): void {
    if (this.clients !== clients) return; // an older, already torn-down chain
    const wasUp = this.state === 'up';
    // ssh2 only ends the channels' readable side when the connection goes (and its destroy() just
    // sends CHANNEL_CLOSE): they are broken, not finished, so the stream is destroyed with the
    // error — a relay sees it fail and aborts the client, rather than taking it for a clean EOF.
    const error = hopError(new Error('connection closed'), hop, pauseCheck ?? 'the connection dropped');
    for (const channel of this.channels) Duplex.prototype.destroy.call(channel, error);
    this.channels.clear();
    this.drained?.();
    void this.teardown(error);
    if (!wasUp) return;
    // A chain that held for a while and dropped is opened again at once, the backoff starting
    // over: the common case is a network change. One that drops soon after its login (a hop
    // that lets us in and then closes the connection) is a failure like any other, retried
    // after the backoff, which keeps growing (0.5 s doubling to 30 s by default).
    const held = pauseCheck !== undefined || Date.now() - this.upSince >= (this.options.stableAfterMs ?? 30_000);
    if (held) this.backoffMs = this.options.initialBackoffMs ?? 500;
    this.failed(error, held);
  }

  private closedError(): ConnectTimeoutError {
    return new ConnectTimeoutError(`the ssh route to ${this.describe()} is closed`);
  }

  /**
   * Ends the hops that are up and gives up a login under way; resolves once the hops have
   * closed, or were ended regardless after the deadline (endHops).
   */
  private teardown(reason: unknown = this.closedError()): Promise<void> {
    this.stopLogins?.abort(reason);
    this.stopLogins = undefined;
    const clients = this.clients;
    this.clients = [];
    if (clients.length === 0) return Promise.resolve();
    return endHops(clients, Promise.all(clients.map((c) => this.hopClosed.get(c))), this.options.closeDeadlineMs);
  }
}

function abortedError(err: unknown, signal: AbortSignal, what: string): unknown {
  if (!signal.aborted) return err;
  const reason: unknown = signal.reason;
  const timedOut = reason instanceof Error && reason.name === 'TimeoutError';
  return new ConnectTimeoutError(`${what} ${timedOut ? 'timed out' : 'was abandoned'}`, { cause: reason });
}
