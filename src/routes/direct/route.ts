// The direct route: dial the destination from this machine, as the client would without a proxy.
// Names go to the OS resolver (getaddrinfo via dns.lookup: /etc/hosts, VPN split DNS, mDNS all
// apply); both families are tried with Happy Eyeballs (RFC 8305, Node's autoSelectFamily). It never
// dials the proxy's own listeners: a client asking for them would make the proxy feed itself; nor,
// unless the route's allow list names them, this machine's own or metadata addresses
// (dial-policy.ts).
import dns from 'node:dns';
import net from 'node:net';
import os from 'node:os';
import { formatHostPort, isLoopbackHost, type HostPort } from '../../core/address.js';
import { CidrIndex, parseIp, type Cidr } from '../../core/cidr.js';
import type { OpenRequest, OpenedStream } from '../../core/types.js';
import {
  ConnectionRefusedError,
  ConnectTimeoutError,
  HostUnreachableError,
  NotAllowedError,
  ProxyError,
  StartupError,
  errorMessage,
} from '../../core/errors.js';
import { DirectDialPolicy } from './dial-policy.js';
import { DIRECT_LOOKUPS, LookupSlots } from './lookup-slots.js';
import type { RouteSpec } from '../spec.js';
import type { Route, RouteStatus } from '../route.js';
import type { RouteClaim } from '../route.js';

type LookupAll = (hostname: string, callback: (err: NodeJS.ErrnoException | null, addresses: dns.LookupAddress[]) => void) => void;

export interface DirectRouteOptions {
  /** The proxy's bound listener addresses (server.address()), read at each dial. */
  ownListeners: () => ReadonlyArray<HostPort>;
  /** Resolver; the OS resolver by default (tests pass their own). */
  lookup?: LookupAll;
  /** Turns for look-ups: the OS resolver's share DIRECT_LOOKUPS (libuv's threads); a given resolver's take none unless given. */
  lookupSlots?: LookupSlots;
  /** Addresses of this machine's interfaces; os.networkInterfaces() by default. */
  localAddresses?: () => string[];
  /** Blocks the route may dial though they are loopback, link-local or metadata addresses (`allow`). */
  allow?: ReadonlyArray<Cidr>;
  /** The reject routes' cidrs: a name that resolves into one is refused as the address would be. */
  rejected?: ReadonlyArray<{ cidr: Cidr; route: string }>;
}

const RESOLVE_ERRORS = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'EAI_NONAME', 'ENODATA', 'ESERVFAIL', 'ENONAME']);
const UNREACHABLE_ERRORS = new Set(['EHOSTUNREACH', 'ENETUNREACH', 'ENETDOWN', 'EHOSTDOWN', 'EADDRNOTAVAIL']);

export class DirectRoute implements Route {
  readonly kind = 'direct';
  private readonly lookupAll: LookupAll;
  private readonly lookupSlots?: LookupSlots;
  private readonly policy: DirectDialPolicy;
  private readonly rejected = new CidrIndex<string>();

  constructor(
    readonly name: string,
    private readonly options: DirectRouteOptions,
  ) {
    this.lookupAll = options.lookup ?? ((host, cb) => dns.lookup(host, { all: true }, cb));
    this.lookupSlots = options.lookupSlots ?? (options.lookup ? undefined : DIRECT_LOOKUPS);
    this.policy = new DirectDialPolicy(options.allow);
    for (const { cidr, route } of options.rejected ?? []) this.rejected.add(cidr, route);
  }

  /**
   * Opens a stream to the destination exactly as the client wrote it: not the claim's normalized
   * host, since "intranet." (absolute) and "intranet" (search domains apply) resolve differently.
   */
  open(request: OpenRequest, _claim: RouteClaim | undefined, signal: AbortSignal): Promise<OpenedStream> {
    return this.dial(request.destination.host, request.destination.port, signal);
  }

  async start(): Promise<void> {}

  status(): RouteStatus {
    return { name: this.name, kind: this.kind, state: 'ready' };
  }

  async close(): Promise<void> {}

  dial(host: string, port: number, signal: AbortSignal): Promise<OpenedStream> {
    const literal = parseIp(host);
    if (literal && this.isOwnListener(literal.text, port)) return Promise.reject(this.selfError(host, port));
    const literalRefusal = literal && this.policy.refusal(literal);
    if (literalRefusal) return Promise.reject(this.policyError(`${literal.text} is a ${literalRefusal}`));
    return new Promise((resolve, reject) => {
      let refusal: ProxyError | undefined;
      // Where a timeout found the dial: a look-up waiting its turn or unanswered is said so, not taken for the host's silence.
      let phase: 'turn' | 'lookup' | 'connect' = 'connect';
      // Our lookup sees every address before Node dials any of them: one of ours refuses them all;
      // those the policy refuses are dropped, and a name left with none is refused.
      const lookup = (hostname: string, _opts: object, cb: (...args: unknown[]) => void) => {
        phase = 'turn';
        this.inTurn(signal, (release) => {
          phase = 'lookup';
          this.lookupAll(hostname, (err, addresses) => {
            phase = 'connect';
            release();
            if (err) return cb(err);
            if (addresses.some((a) => this.isOwnListener(a.address, port))) {
              refusal = this.selfError(host, port);
              return cb(refusal);
            }
            // An address a reject route blocks is refused by name as by address (a name is no way around it).
            const allowed = addresses.filter((a) => this.rejectedBy(a.address) === undefined);
            if (allowed.length === 0 && addresses.length > 0) {
              const by = [...new Set(addresses.map((a) => this.rejectedBy(a.address)))].map((r) => `reject route ${r}`);
              refusal = new NotAllowedError(`${host} resolves only to ${addresses.map((a) => a.address).join(', ')}, which ${by.join(' and ')} refuses`);
              return cb(refusal);
            }
            addresses = allowed;
            const dialable = addresses.filter((a) => this.addressRefusal(a.address) === undefined);
            if (dialable.length === 0 && addresses.length > 0) {
              const kinds = new Set(addresses.map((a) => this.addressRefusal(a.address)));
              refusal = this.policyError(`${host} resolves only to ${addresses.map((a) => a.address).join(', ')} (${[...kinds].join(', ')})`);
              return cb(refusal);
            }
            if ((_opts as { all?: boolean }).all) return cb(null, dialable);
            cb(null, dialable[0]?.address, dialable[0]?.family);
          });
        });
      };
      // allowHalfOpen: the far end's FIN ends that direction only (tcpHalfClose below); the
      // client may still send, as after a server's greeting and FIN.
      const socket = net.connect({
        host: literal ? literal.text : host,
        port,
        autoSelectFamily: true,
        allowHalfOpen: true,
        lookup: lookup as unknown as net.LookupFunction,
      });
      const onAbort = () => {
        socket.destroy();
        const reason: unknown = signal.reason;
        const timedOut = reason instanceof Error && reason.name === 'TimeoutError';
        const target = formatHostPort(host, port);
        const slots = this.lookupSlots?.slots ?? 0;
        reject(
          !timedOut
            ? new ConnectTimeoutError(`connecting to ${target} was abandoned`, { cause: reason })
            : phase === 'lookup'
              ? new ConnectTimeoutError(`connecting to ${target} timed out: the OS resolver did not answer the look-up of ${host}`, { cause: reason })
              : phase === 'turn'
                ? new ConnectTimeoutError(
                    `connecting to ${target} timed out: the look-up of ${host} waited its turn behind ${this.lookupSlots?.running ?? 0} the OS resolver had not answered ` +
                      `(the direct route looks up ${slots} name${slots === 1 ? '' : 's'} at once; a larger UV_THREADPOOL_SIZE allows more)`,
                    { cause: reason },
                  )
                : new ConnectTimeoutError(`connecting to ${target} timed out`, { cause: reason }),
        );
      };
      if (signal.aborted) return onAbort();
      signal.addEventListener('abort', onAbort, { once: true });
      const onError = (err: Error) => {
        signal.removeEventListener('abort', onAbort);
        socket.destroy();
        reject(refusal ?? dialError(err, host, port));
      };
      socket.once('connect', () => {
        signal.removeEventListener('abort', onAbort);
        socket.off('error', onError);
        socket.setNoDelay(true);
        resolve({ stream: socket, via: `direct ${formatHostPort(socket.remoteAddress ?? host, socket.remotePort ?? port)}`, tcpHalfClose: true });
      });
      socket.once('error', onError);
    });
  }

  /** Runs a look-up in its turn: the OS resolver's wait for a slow-work thread (lookup-slots.ts). */
  private inTurn(signal: AbortSignal, lookup: (release: () => void) => void): void {
    if (this.lookupSlots) this.lookupSlots.run(signal, lookup);
    else lookup(() => undefined);
  }

  /** The reject route whose cidrs hold a resolved address, if one does. */
  private rejectedBy(address: string): string | undefined {
    if (this.rejected.size === 0) return undefined;
    const ip = parseIp(address.replace(/%.*$/, ''));
    return ip && this.rejected.lookup(ip)?.value;
  }

  /** The policy's verdict on a resolved address (a zone index, "fe80::1%eth0", does not change it). */
  private addressRefusal(address: string): string | undefined {
    const ip = parseIp(address.replace(/%.*$/, ''));
    return ip ? this.policy.refusal(ip) : 'address the proxy cannot read';
  }

  private policyError(what: string): NotAllowedError {
    return new NotAllowedError(`${what}: a direct route dials loopback, link-local and cloud-metadata addresses only when its allow list names them`);
  }

  private selfError(host: string, port: number): NotAllowedError {
    return new NotAllowedError(`${formatHostPort(host, port)} is this proxy's own listener; it does not connect to itself`);
  }

  /** Would dialling ip:port reach one of our listeners? Unspecified addresses reach loopback. */
  isOwnListener(address: string, port: number): boolean {
    const listeners = this.options.ownListeners().filter((l) => l.port === port);
    if (listeners.length === 0) return false;
    const ip = parseIp(address);
    if (!ip) return false;
    const target = ip.text === '0.0.0.0' ? '127.0.0.1' : ip.text === '::' ? '::1' : ip.text;
    let local: Set<string> | undefined;
    const isLocal = () => {
      local ??= new Set((this.options.localAddresses?.() ?? interfaceAddresses()).map((a) => parseIp(a)?.text ?? a));
      return isLoopbackHost(target) || local.has(target);
    };
    return listeners.some((l) => {
      const bound = parseIp(l.host)?.text ?? (isLoopbackHost(l.host) ? '127.0.0.1' : l.host);
      if (bound === '0.0.0.0') return !target.includes(':') && isLocal();
      if (bound === '::') return isLocal();
      return bound === target;
    });
  }
}

function interfaceAddresses(): string[] {
  return Object.values(os.networkInterfaces()).flatMap((list) => (list ?? []).map((i) => i.address));
}

/** The one mapping of a dial failure to what the client is told. */
export function dialError(err: unknown, host: string, port: number): ProxyError {
  if (err instanceof ProxyError) return err;
  const errors = err instanceof AggregateError ? (err.errors as NodeJS.ErrnoException[]) : [err as NodeJS.ErrnoException];
  const codes = errors.map((e) => e?.code ?? '');
  const code = (err as NodeJS.ErrnoException).code ?? codes[0] ?? '';
  const target = formatHostPort(host, port);
  if (RESOLVE_ERRORS.has(code)) return new HostUnreachableError(`cannot resolve ${host} (${code})`, { cause: err });
  if (codes.includes('ECONNREFUSED') && codes.every((c) => c === 'ECONNREFUSED' || UNREACHABLE_ERRORS.has(c))) {
    return new ConnectionRefusedError(`${target} refused the connection`, { cause: err });
  }
  if (codes.includes('ETIMEDOUT')) return new ConnectTimeoutError(`connecting to ${target} timed out`, { cause: err });
  if (codes.some((c) => UNREACHABLE_ERRORS.has(c))) return new HostUnreachableError(`${target} is unreachable (${codes.join(', ')})`, { cause: err });
  return new HostUnreachableError(`cannot connect to ${target}: ${errorMessage(err)}`, { cause: err });
}

/**
 * Direct pass-through makes the proxy an exit to everything this machine reaches; allow it only
 * when every listener is on loopback or clients must authenticate.
 */
export function assertDirectAllowed(
  table: { routes: readonly RouteSpec[] },
  listens: ReadonlyArray<{ flag: string; host: string; port: number }>,
  hasCredentials: boolean,
): void {
  const direct = table.routes.find((r) => r.kind === 'direct');
  if (!direct || hasCredentials) return;
  const exposed = listens.find((l) => !isLoopbackHost(l.host));
  if (!exposed) return;
  throw new StartupError(
    `direct pass-through (route ${direct.name}, ${direct.origin}) would let anyone who reaches ${exposed.flag} ${formatHostPort(exposed.host, exposed.port)} connect anywhere from this machine: ` +
      'listen on loopback only, or require proxy credentials (--proxy-auth-file)',
  );
}
