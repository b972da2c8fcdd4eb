// Every failure on the data path is one of these typed errors. Each carries the SOCKS5 reply
// (RFC 1928 §6) and the HTTP status it maps to, so the listeners never guess: `replyFor` is the
// one place that turns any thrown value into what the client is told.
import { escapeControls } from './escape.js';

export const SocksReply = {
  succeeded: 0x00,
  generalFailure: 0x01,
  notAllowed: 0x02,
  networkUnreachable: 0x03,
  hostUnreachable: 0x04,
  connectionRefused: 0x05,
  ttlExpired: 0x06,
  commandNotSupported: 0x07,
  addressTypeNotSupported: 0x08,
} as const;
export type SocksReplyCode = (typeof SocksReply)[keyof typeof SocksReply];

export abstract class ProxyError extends Error {
  /** Stable machine-readable reason, used in logs and status output. */
  abstract readonly reason: string;
  abstract readonly socksReply: SocksReplyCode;
  abstract readonly httpStatus: number;
  /** True when another endpoint of the same Service may well succeed (pod gone, dial refused). */
  readonly retryable: boolean;
  constructor(message: string, options?: { cause?: unknown; retryable?: boolean }) {
    // No stack trace: a ProxyError is an answer to a client (a refused name, a pod that is gone),
    // made on the data path for every such request, and V8's frame capture was most of a routing
    // decision's cost (~10 µs of ~20 on the big-cluster bench). What failed underneath keeps its
    // own stack in `cause`.
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    try {
      super(message, options);
    } finally {
      Error.stackTraceLimit = limit;
    }
    this.name = new.target.name;
    this.retryable = options?.retryable ?? false;
  }
}

/** The destination is outside every route (no cluster claims it); we are not an open relay. */
export class NotAllowedError extends ProxyError {
  readonly reason = 'not-allowed';
  readonly socksReply = SocksReply.notAllowed;
  readonly httpStatus = 403;
}

/**
 * The API server refused the port-forward to a pod the route found (RBAC): the destination was
 * the route's, so no other rule may take it instead (a short name must not turn "not served").
 */
export class PortForwardForbiddenError extends NotAllowedError {}

/** The name or IP belongs to a cluster but nothing there answers to it (no such Service/Pod/port). */
export class HostUnreachableError extends ProxyError {
  readonly reason = 'unknown-target';
  readonly socksReply = SocksReply.hostUnreachable;
  readonly httpStatus = 502;
}

/** The route that serves the destination cannot now (its API server down, its cache not synced). */
export class RouteUnavailableError extends ProxyError {
  readonly reason = 'route-unavailable';
  readonly socksReply = SocksReply.hostUnreachable;
  readonly httpStatus = 502;
}

/** The Service exists but has no ready, non-terminating endpoint right now. */
export class NoReadyEndpointError extends ProxyError {
  readonly reason = 'no-ready-endpoint';
  readonly socksReply = SocksReply.hostUnreachable;
  readonly httpStatus = 503;
}

/** The Service cannot be reached through a pod (ExternalName, endpoints that are not pods). */
export class UnsupportedTargetError extends ProxyError {
  readonly reason = 'unsupported-target';
  readonly socksReply = SocksReply.hostUnreachable;
  readonly httpStatus = 502;
}

/** The pod was found but nothing listens on the port (the kubelet's dial failed). */
export class ConnectionRefusedError extends ProxyError {
  readonly reason = 'connection-refused';
  readonly socksReply = SocksReply.connectionRefused;
  readonly httpStatus = 502;
}

/** Opening the stream took longer than the connect timeout. */
export class ConnectTimeoutError extends ProxyError {
  readonly reason = 'timeout';
  readonly socksReply = SocksReply.ttlExpired;
  readonly httpStatus = 504;
}

/** The Kubernetes API failed us (unreachable, 401/403 on port-forward, 5xx, broken upgrade). */
export class UpstreamApiError extends ProxyError {
  readonly reason = 'api-error';
  readonly socksReply = SocksReply.generalFailure;
  readonly httpStatus = 502;
}

/**
 * A hop on the way to the destination refused us (an SSH jump host: authentication, host key,
 * protocol). Not the destination's fault, so not 0x05; the message names the hop.
 */
export class UpstreamHopError extends ProxyError {
  readonly reason = 'hop-failed';
  readonly socksReply = SocksReply.generalFailure;
  readonly httpStatus = 502;
}

/**
 * The destination's server failed a plain-HTTP exchange the proxy forwards, after its stream
 * opened: it answered with something that is not HTTP, closed or reset without answering.
 */
export class OriginFailedError extends ProxyError {
  readonly reason = 'origin-failed';
  readonly socksReply = SocksReply.generalFailure;
  readonly httpStatus = 502;
}

/** The proxy is at its stream limit or shutting down. */
export class OverloadedError extends ProxyError {
  readonly reason = 'overloaded';
  readonly socksReply = SocksReply.generalFailure;
  readonly httpStatus = 503;
}

/** A client asked for something the protocol allows but we do not do (BIND, UDP ASSOCIATE). */
export class CommandNotSupportedError extends ProxyError {
  readonly reason = 'command-not-supported';
  readonly socksReply = SocksReply.commandNotSupported;
  readonly httpStatus = 501;
}

export class AddressTypeNotSupportedError extends ProxyError {
  readonly reason = 'address-type-not-supported';
  readonly socksReply = SocksReply.addressTypeNotSupported;
  readonly httpStatus = 400;
}

/** The client spoke a malformed request. */
export class BadRequestError extends ProxyError {
  readonly reason = 'bad-request';
  readonly socksReply = SocksReply.generalFailure;
  readonly httpStatus = 400;
}

/**
 * Proxy authentication is on and the client sent no credentials, wrong ones, or used a protocol
 * that cannot carry them (SOCKS4). Messages never contain the password.
 */
export class ProxyAuthRequiredError extends ProxyError {
  readonly reason = 'auth-failed';
  readonly socksReply = SocksReply.notAllowed;
  readonly httpStatus = 407;
}

/**
 * The same failure (class, replies, cause) with `prefix` before its message: the router names the
 * route a failure was on with it. A copy, so an error shared by several waiters is not changed.
 */
export function withMessagePrefix<E extends ProxyError>(err: E, prefix: string): E {
  const copy = Object.assign(Object.create(Object.getPrototypeOf(err) as object) as E, err);
  Object.defineProperty(copy, 'message', { value: `${prefix}${err.message}`, writable: true, configurable: true });
  if (err.cause !== undefined) Object.defineProperty(copy, 'cause', { value: err.cause, writable: true, configurable: true });
  return copy;
}

export interface Reply {
  reason: string;
  socks: SocksReplyCode;
  http: number;
  message: string;
}

/**
 * The single mapping from anything thrown on the data path to what the client is told (and the
 * log says). Messages quote client text (names, Host headers, URLs), so control characters are
 * escaped here, once, for every error body and log line that carries them.
 */
export function replyFor(err: unknown): Reply {
  if (err instanceof ProxyError) {
    return { reason: err.reason, socks: err.socksReply, http: err.httpStatus, message: escapeControls(err.message) };
  }
  const message = err instanceof Error ? err.message : String(err);
  return { reason: 'internal', socks: SocksReply.generalFailure, http: 502, message: escapeControls(message) };
}

/** SOCKS4 has a single failure code; 0x5a is success, 0x5b "rejected or failed" (SOCKS4 spec). */
export const Socks4Reply = { granted: 0x5a, rejected: 0x5b } as const;

export function errorMessage(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  // A name with an address in each family (localhost as ::1 and 127.0.0.1, a dual-stack API
  // endpoint): Node tries both and fails with an AggregateError whose message is empty.
  if (err instanceof AggregateError && !err.message && err.errors.length > 0) return [...new Set(err.errors.map(errorMessage))].join('; ');
  // Node writes a socket error's IPv6 address and port as "connect ECONNREFUSED fd00::1:6443",
  // where kubectl writes [fd00::1]:6443: the port reads as part of the address.
  const tls = openSslReason(err.message);
  if (tls) return tls;
  const { address, port } = err as NodeJS.ErrnoException & { address?: unknown; port?: unknown };
  if (typeof address === 'string' && address.includes(':') && typeof port === 'number') {
    return err.message.replace(` ${address}:${port}`, ` [${address}]:${port}`);
  }
  return err.message;
}

/**
 * OpenSSL's words as Node passes them on ("write EPROTO 80EC…:error:0A00010B:SSL
 * routines:ssl3_get_record:wrong version number:../deps/openssl/…/ssl3_record.c:350:\n"), in
 * place, by their reason (what a message adds around them, a proxy's name, stays). "wrong version
 * number" is a peer that answered without TLS, kubectl's "server gave HTTP response to HTTPS
 * client" (an http:// endpoint given as https://, a proxy's own answer).
 */
function openSslReason(message: string): string | undefined {
  const m = /(?:(?:read|write) )?(?:EPROTO )?[0-9A-F]+:error:[0-9A-F]+:[^:\n]*:[^:\n]*:([^:\n]+):[^:\n]*:\d+:\n?/.exec(message);
  if (!m) return undefined;
  const reason = m[1]!;
  const said = PLAIN_TEXT_REASONS.has(reason)
    ? `TLS failed: the server answered with something other than TLS (${reason}): an http:// address given as https://, or a proxy answering on its behalf?`
    : `TLS failed: ${reason}`;
  return (message.slice(0, m.index) + said + message.slice(m.index + m[0].length).replace(/^ +/, ' ')).trim();
}

const PLAIN_TEXT_REASONS = new Set(['wrong version number', 'packet length too long', 'http request']);

/**
 * The process has no file descriptor left (EMFILE, or the system none: ENFILE), here or in any
 * cause: a socket could not even be made, which says nothing of the peer it was for.
 */
export function outOfFiles(err: unknown): boolean {
  for (let e = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'EMFILE' || code === 'ENFILE') return true;
    if (e instanceof AggregateError && e.errors.some(outOfFiles)) return true;
  }
  return false;
}

/** The proxy cannot start (port taken, bad kubeconfig, API unreachable); message is one line. */
export class StartupError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StartupError';
  }
}

/**
 * A route the user configured is invalid (an option it cannot honour, a file it cannot use): the
 * start stops naming the route. A route whose far end is down is not this: it starts degraded.
 */
export class RouteConfigError extends StartupError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'RouteConfigError';
  }
}
