// SSH failures as the ProxyErrors the listeners report (core/errors.ts). A direct-tcpip channel
// refused by the last hop is about the destination (RFC 4254 §5.1 reason codes, plus OpenSSH's
// description text to tell "refused" from "unknown host": both come as CONNECT_FAILED, see
// channels.c connect_to_helper / channel_post_connecting). A hop that cannot be reached or
// logged in to is about the chain: the message names the hop, and the reply is never 0x05, so a
// client does not take a jump host's failure for the destination's.
import { formatHostPort } from '../core/address.js';
import {
  ConnectionRefusedError,
  ConnectTimeoutError,
  HostUnreachableError,
  NotAllowedError,
  OverloadedError,
  UpstreamHopError,
  errorMessage,
  type ProxyError,
} from '../core/errors.js';
import { describeHop, type SshHop } from './chain.js';

/** RFC 4254 §5.1 SSH_MSG_CHANNEL_OPEN_FAILURE reason codes. */
export const OpenFailure = {
  administrativelyProhibited: 1,
  connectFailed: 2,
  unknownChannelType: 3,
  resourceShortage: 4,
} as const;

/** A host key we will not accept; the message has the fingerprint and what to do. */
export class HostKeyRefusal extends UpstreamHopError {}

/**
 * What went wrong at which hop of a chain, in a form `doctor` can pick its fix from (the message
 * is for people; doctor/ssh.ts must not parse it). Kept beside the error rather than on it: the
 * errors are the listeners' ProxyErrors, and only a failed login carries a hop.
 */
export type HopFailureKind =
  'host-key-unknown' | 'host-key-changed' | 'host-key-revoked' | 'host-key-type' | 'auth' | 'unreachable' | 'timeout' | 'protocol' | 'closed';
export interface HopFailure {
  hop: SshHop;
  kind: HopFailureKind;
}

const hopFailures = new WeakMap<object, HopFailure>();

/** Records which hop `err` is about and what kind of failure it is; returns `err`. */
export function tagHopFailure<T extends ProxyError>(err: T, hop: SshHop, kind: HopFailureKind): T {
  hopFailures.set(err, { hop, kind });
  return err;
}

/** The hop a login failure is about (undefined for any other error). */
export function hopFailureOf(err: unknown): HopFailure | undefined {
  return typeof err === 'object' && err !== null ? hopFailures.get(err) : undefined;
}

const NAME_FAILURE =
  /name or service not known|nodename nor servname|temporary failure in name resolution|no address associated|non-recoverable failure in name resolution|unknown host|name resolution/i;

export function channelOpenError(err: unknown, host: string, port: number, lastHop: SshHop): ProxyError {
  const reason = (err as { reason?: unknown }).reason;
  const description = errorMessage(err).replace(/^\(SSH\) Channel open failure: /, '');
  const by = `${lastHop.alias}`;
  const target = formatHostPort(host, port);
  switch (reason) {
    case OpenFailure.administrativelyProhibited:
      return new NotAllowedError(`${by} does not allow forwarding to ${target} (administratively prohibited${description ? `: ${description}` : ''})`, {
        cause: err,
      });
    case OpenFailure.connectFailed:
      if (/refused/i.test(description)) return new ConnectionRefusedError(`${target} refused the connection (from ${by})`, { cause: err });
      if (NAME_FAILURE.test(description)) return new HostUnreachableError(`${by} cannot resolve ${host} (${description})`, { cause: err });
      if (/timed out/i.test(description)) return new ConnectTimeoutError(`connecting to ${target} from ${by} timed out`, { cause: err });
      return new HostUnreachableError(`${by} cannot connect to ${target}${description ? ` (${description})` : ''}`, { cause: err });
    case OpenFailure.resourceShortage:
      return new OverloadedError(`${by} is out of resources for more channels (${target})`, { cause: err });
    default:
      return new UpstreamHopError(`${by} did not open a channel to ${target}: ${description}`, { cause: err });
  }
}

/**
 * ssh2's "no matching host key format": the hop has no host key of a type asked for (OpenSSH:
 * "no matching host key type found"). undefined for any other error.
 */
export function noCommonHostKeyError(err: unknown, hop: SshHop, offered: readonly string[]): ProxyError | undefined {
  const e = err as Error & { level?: string };
  if (e.level !== 'handshake' || !/no matching host key/.test(errorMessage(err))) return undefined;
  const from = hop.hostKeyAlgorithms ? 'HostKeyAlgorithms' : 'the defaults';
  return tagHopFailure(
    new UpstreamHopError(`ssh hop ${describeHop(hop)}: no matching host key type found: it has no host key for any of ${offered.join(', ')} (${from})`, {
      cause: err,
    }),
    hop,
    'host-key-type',
  );
}

/**
 * A hop that failed: unreachable (0x04), timed out, or refused us (0x01), named with its address.
 * `authNote` is added when authentication failed (what became of the agent).
 */
export function hopError(err: unknown, hop: SshHop, context?: string, authNote?: string): ProxyError {
  if (err instanceof HostKeyRefusal) return err;
  const e = err as Error & { level?: string; code?: unknown; reason?: unknown };
  const name = `ssh hop ${describeHop(hop)}`;
  const detail = context ?? errorMessage(err);
  if (typeof e.reason === 'number') {
    // Opening the channel to this hop from the one before failed.
    const why = errorMessage(err).replace(/^\(SSH\) Channel open failure: /, '');
    return tagHopFailure(new HostUnreachableError(`${name} is unreachable: ${detail}${why ? ` (${why})` : ''}`, { cause: err }), hop, 'unreachable');
  }
  if (e.level === 'client-authentication')
    return tagHopFailure(
      new UpstreamHopError(`${name} refused our keys (publickey authentication failed${authNote ? `; ${authNote}` : ''})`, { cause: err }),
      hop,
      'auth',
    );
  if (e.level === 'client-timeout')
    return tagHopFailure(new HostUnreachableError(`${name} did not complete the SSH handshake in time`, { cause: err }), hop, 'timeout');
  if (typeof e.code === 'number') return disconnectError(err, e.code, hop, name, authNote);
  // Only a string code is an errno (a socket error); a number is a DISCONNECT reason, above.
  if (e.level === 'client-socket' || typeof e.code === 'string') {
    const code = typeof e.code === 'string' ? e.code : '';
    const unreachable = new HostUnreachableError(`${name} is unreachable: ${code} ${errorMessage(err)}`.replace(/\s+/g, ' ').trim(), { cause: err });
    return tagHopFailure(unreachable, hop, code === 'ETIMEDOUT' ? 'timeout' : 'unreachable');
  }
  if (e.level === 'protocol' || e.level === 'client-ssh')
    return tagHopFailure(new UpstreamHopError(`${name}: SSH protocol failure: ${errorMessage(err)}`, { cause: err }), hop, 'protocol');
  return tagHopFailure(new HostUnreachableError(`${name}: ${detail}`, { cause: err }), hop, 'closed');
}

/** RFC 4253 §11.1 / RFC 4250 §4.2.2 DISCONNECT reasons that are about logging in. */
const AUTH_DISCONNECTS = new Set([13 /* auth cancelled */, 14 /* no more auth methods */, 15 /* illegal user name */]);

/**
 * The hop sent DISCONNECT during login (ssh2's client.js puts the reason code on err.code). sshd
 * sends "Too many authentication failures" as reason 2, protocol error: the text decides too.
 */
function disconnectError(err: unknown, reason: number, hop: SshHop, name: string, authNote: string | undefined): ProxyError {
  const text = errorMessage(err);
  if (AUTH_DISCONNECTS.has(reason) || /authentication/i.test(text))
    return tagHopFailure(
      new UpstreamHopError(`${name} refused our keys (it disconnected: ${text}${authNote ? `; ${authNote}` : ''})`, { cause: err }),
      hop,
      'auth',
    );
  return tagHopFailure(new UpstreamHopError(`${name}: SSH protocol failure: it disconnected (reason ${reason}): ${text}`, { cause: err }), hop, 'protocol');
}
