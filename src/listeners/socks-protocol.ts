// Pure, incremental SOCKS handshake parsing and reply encoding. No I/O: feed bytes, get typed
// steps. Implements:
//   - SOCKS5, RFC 1928 (method negotiation §3, requests §4/§5, replies §6), CONNECT only;
//   - RFC 1929 username/password sub-negotiation, when the method policy selects method 0x02;
//   - SOCKS4 ("SOCKS: A protocol for TCP proxy across firewalls", Ying-Da Lee) and its
//     SOCKS4A extension (DSTIP 0.0.0.x, x ≠ 0, followed by a NUL-terminated host name), CONNECT only.
// Hostile input never throws: every malformed message becomes a 'reject' (reply, then close)
// carrying a typed ProxyError, or a 'close' (drop without reply) when no reply is meaningful.
import net from 'node:net';
import {
  AddressTypeNotSupportedError,
  BadRequestError,
  CommandNotSupportedError,
  HostUnreachableError,
  Socks4Reply,
  type ProxyError,
  type SocksReplyCode,
} from '../core/errors.js';
import { destinationFor, formatIPv6, ipv6ToBytes } from '../core/address.js';
import type { Destination } from '../core/types.js';

/** RFC 1928 §3 method codes; 0x02 is RFC 1929 username/password. */
export const SocksMethod = { noAuth: 0x00, gssapi: 0x01, userPass: 0x02, noAcceptable: 0xff } as const;

const ATYP_IPV4 = 0x01;
const ATYP_DOMAIN = 0x03;
const ATYP_IPV6 = 0x04;
const CMD_CONNECT = 0x01;

/** Longest SOCKS4 USERID / SOCKS4A host name we accept (NUL excluded). */
export const SOCKS4_MAX_FIELD = 255;

export type SocksStep =
  /** Not enough bytes yet. */
  | { type: 'more' }
  /** SOCKS5 greeting; the caller answers with selectMethod() and encodeMethodSelection(). */
  | { type: 'greeting'; methods: number[] }
  | { type: 'connect'; version: 4 | 5; destination: Destination; userId?: string }
  /** RFC 1929 credentials; the caller checks them, answers with encodeAuthStatus() and authResult(). */
  | { type: 'auth'; username: Buffer; password: Buffer }
  /** Send the reply for `error` (SOCKS5: its socksReply; SOCKS4: 0x5B), then close. */
  | { type: 'reject'; version: 4 | 5; error: ProxyError; destination?: Destination }
  /** An HTTP request (a client pointed at this port as an HTTP proxy): told so in HTTP, then closed. */
  | { type: 'http' }
  /** A TLS ClientHello (a client given https:// for this port): logged as such, then dropped. */
  | { type: 'tls' }
  /** Drop the connection without a reply (not SOCKS, or a version we cannot answer). */
  | { type: 'close'; reason: string };

type Parsed = { step: SocksStep; consumed: number };
const MORE: Parsed = { step: { type: 'more' }, consumed: 0 };

/**
 * Decides which RFC 1928 method to use from the client's offer. The seam for RFC 1929: a
 * policy that returns 0x02 will make the parser expect a username/password sub-negotiation.
 */
export interface SocksMethodPolicy {
  selectMethod(offered: readonly number[]): number;
}
export const noAuthPolicy: SocksMethodPolicy = {
  selectMethod: (offered) => (offered.includes(SocksMethod.noAuth) ? SocksMethod.noAuth : SocksMethod.noAcceptable),
};
/** Proxy authentication on: username/password or nothing, even when "no authentication" is offered. */
export const userPassPolicy: SocksMethodPolicy = {
  selectMethod: (offered) => (offered.includes(SocksMethod.userPass) ? SocksMethod.userPass : SocksMethod.noAcceptable),
};

/** RFC 1929 request: VER(0x01) ULEN UNAME PLEN PASSWD. Empty fields reach the caller, who refuses them. */
export function parseUserPassAuth(buf: Buffer): Parsed {
  if (buf.length < 2) return MORE;
  if (buf[0] !== 0x01) return { step: { type: 'close', reason: `RFC 1929 sub-negotiation with version ${buf[0]}` }, consumed: 0 };
  const ulen = buf[1]!;
  if (buf.length < 3 + ulen) return MORE;
  const plen = buf[2 + ulen]!;
  const end = 3 + ulen + plen;
  if (buf.length < end) return MORE;
  // Copies, so the caller holding them does not pin the handshake buffer.
  const username = Buffer.from(buf.subarray(2, 2 + ulen));
  const password = Buffer.from(buf.subarray(3 + ulen, end));
  return { step: { type: 'auth', username, password }, consumed: end };
}

/** SOCKS5 greeting: VER NMETHODS METHODS… (RFC 1928 §3). `buf[0]` is known to be 5. */
export function parseSocks5Greeting(buf: Buffer): Parsed {
  if (buf.length < 2) return MORE;
  const n = buf[1]!;
  if (buf.length < 2 + n) return MORE;
  return { step: { type: 'greeting', methods: [...buf.subarray(2, 2 + n)] }, consumed: 2 + n };
}

/** SOCKS5 request: VER CMD RSV ATYP DST.ADDR DST.PORT (RFC 1928 §4). */
export function parseSocks5Request(buf: Buffer): Parsed {
  if (buf.length < 1) return MORE;
  if (buf[0] !== 5) return { step: { type: 'close', reason: `SOCKS5 request with version ${buf[0]}` }, consumed: 0 };
  if (buf.length < 4) return MORE;
  const cmd = buf[1]!;
  const atyp = buf[3]!;
  const reject = (error: ProxyError, destination?: Destination): Parsed => ({ step: { type: 'reject', version: 5, error, destination }, consumed: buf.length });
  if (cmd !== CMD_CONNECT) {
    const what = cmd === 0x02 ? 'BIND' : cmd === 0x03 ? 'UDP ASSOCIATE' : `command 0x${cmd.toString(16)}`;
    return reject(new CommandNotSupportedError(`SOCKS5 ${what} is not supported, only CONNECT`));
  }
  let addrEnd: number;
  let host: string;
  if (atyp === ATYP_IPV4) {
    addrEnd = 8;
    if (buf.length < addrEnd + 2) return MORE;
    host = [...buf.subarray(4, 8)].join('.');
  } else if (atyp === ATYP_IPV6) {
    addrEnd = 20;
    if (buf.length < addrEnd + 2) return MORE;
    host = formatIPv6(buf.subarray(4, 20));
  } else if (atyp === ATYP_DOMAIN) {
    if (buf.length < 5) return MORE;
    const len = buf[4]!;
    addrEnd = 5 + len;
    if (buf.length < addrEnd + 2) return MORE;
    if (len === 0) return reject(new BadRequestError('SOCKS5 request with an empty host name'));
    const name = buf.subarray(5, addrEnd);
    if (!isPrintableName(name)) return reject(new HostUnreachableError('SOCKS5 host name contains NUL, spaces or non-printable bytes'));
    host = name.toString('latin1');
  } else {
    return reject(new AddressTypeNotSupportedError(`SOCKS5 address type 0x${atyp.toString(16)} is not supported`));
  }
  const port = buf.readUInt16BE(addrEnd);
  const destination = atyp === ATYP_DOMAIN ? destinationFor(host, port) : { host, port, type: atyp === ATYP_IPV4 ? ('ipv4' as const) : ('ipv6' as const) };
  if (port === 0) return reject(new BadRequestError('SOCKS5 CONNECT to port 0'), destination);
  return { step: { type: 'connect', version: 5, destination }, consumed: addrEnd + 2 };
}

/** SOCKS4/4A request: VN CD DSTPORT DSTIP USERID NUL [HOST NUL]. `buf[0]` is known to be 4. */
export function parseSocks4Request(buf: Buffer): Parsed {
  if (buf.length < 8) return MORE;
  const reject = (error: ProxyError, destination?: Destination): Parsed => ({ step: { type: 'reject', version: 4, error, destination }, consumed: buf.length });
  const cd = buf[1]!;
  const port = buf.readUInt16BE(2);
  const ip = buf.subarray(4, 8);
  const userEnd = buf.indexOf(0, 8);
  if (userEnd < 0) {
    return buf.length - 8 > SOCKS4_MAX_FIELD ? reject(new BadRequestError('SOCKS4 USERID too long')) : MORE;
  }
  if (userEnd - 8 > SOCKS4_MAX_FIELD) return reject(new BadRequestError('SOCKS4 USERID too long'));
  const userId = buf.toString('latin1', 8, userEnd);
  let consumed = userEnd + 1;
  let destination: Destination;
  // SOCKS4A: 0.0.0.x with x ≠ 0 means "the host name follows".
  if (ip[0] === 0 && ip[1] === 0 && ip[2] === 0 && ip[3] !== 0) {
    const hostEnd = buf.indexOf(0, consumed);
    if (hostEnd < 0) {
      return buf.length - consumed > SOCKS4_MAX_FIELD ? reject(new BadRequestError('SOCKS4A host name too long')) : MORE;
    }
    const name = buf.subarray(consumed, hostEnd);
    consumed = hostEnd + 1;
    if (name.length > SOCKS4_MAX_FIELD) return reject(new BadRequestError('SOCKS4A host name too long'));
    if (name.length === 0) return reject(new BadRequestError('SOCKS4A request with an empty host name'));
    if (!isPrintableName(name)) return reject(new HostUnreachableError('SOCKS4A host name contains spaces or non-printable bytes'));
    destination = destinationFor(name.toString('latin1'), port);
  } else {
    destination = { host: [...ip].join('.'), port, type: 'ipv4' };
  }
  if (cd !== CMD_CONNECT) {
    const what = cd === 0x02 ? 'BIND' : `command 0x${cd.toString(16)}`;
    return reject(new CommandNotSupportedError(`SOCKS4 ${what} is not supported, only CONNECT`), destination);
  }
  if (destination.host === '0.0.0.0') return reject(new BadRequestError('SOCKS4 CONNECT to 0.0.0.0'), destination);
  if (port === 0) return reject(new BadRequestError('SOCKS4 CONNECT to port 0'), destination);
  return { step: { type: 'connect', version: 4, destination, userId }, consumed };
}

function isPrintableName(name: Buffer): boolean {
  for (const b of name) if (b < 0x21 || b > 0x7e) return false;
  return true;
}

/**
 * The handshake state machine for one client connection. Bytes are appended with push();
 * next() returns the next step. After 'connect', 'reject' or 'close' the parser is finished and
 * rest() returns what the client sent beyond its request (pipelined payload).
 */
export class SocksHandshakeParser {
  private buf: Buffer = Buffer.alloc(0);
  private phase: 'start' | 'greeted' | 'auth' | 'authing' | 'request' | 'done' = 'start';

  push(chunk: Buffer): void {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
  }

  /** Tell the parser which method was chosen after a 'greeting' step. */
  methodSelected(method: number): void {
    if (this.phase !== 'greeted') return;
    // "No authentication" goes straight to the request, RFC 1929 first authenticates; anything
    // else (0xFF included) ends the handshake.
    this.phase = method === SocksMethod.noAuth ? 'request' : method === SocksMethod.userPass ? 'auth' : 'done';
  }

  /** Tell the parser whether the credentials of an 'auth' step were accepted. */
  authResult(ok: boolean): void {
    if (this.phase !== 'authing') return;
    this.phase = ok ? 'request' : 'done';
  }

  get finished(): boolean {
    return this.phase === 'done';
  }

  next(): SocksStep {
    let parsed: Parsed;
    switch (this.phase) {
      case 'start': {
        if (this.buf.length === 0) return { type: 'more' };
        const version = this.buf[0];
        if (version === 5) parsed = parseSocks5Greeting(this.buf);
        else if (version === 4) parsed = parseSocks4Request(this.buf);
        // A letter starts an HTTP method (GET, CONNECT…), never a SOCKS greeting.
        else if (version! >= 0x41 && version! <= 0x5a) parsed = { step: { type: 'http' }, consumed: 0 };
        else if (version === 0x16 && this.buf.length < 2) return { type: 'more' };
        else if (version === 0x16 && this.buf[1] === 0x03) parsed = { step: { type: 'tls' }, consumed: 0 };
        else parsed = { step: { type: 'close', reason: `not a SOCKS client (first byte 0x${version!.toString(16)})` }, consumed: 0 };
        break;
      }
      case 'request':
        parsed = parseSocks5Request(this.buf);
        break;
      case 'auth':
        parsed = parseUserPassAuth(this.buf);
        break;
      case 'authing':
      case 'greeted':
        // The caller must answer the greeting (or the credentials) first; waiting is the safe reading of misuse.
        return { type: 'more' };
      case 'done':
        return { type: 'close', reason: 'handshake already finished' };
    }
    const { step, consumed } = parsed;
    if (step.type === 'more') return step;
    this.buf = this.buf.subarray(consumed);
    this.phase = step.type === 'greeting' ? 'greeted' : step.type === 'auth' ? 'authing' : 'done';
    return step;
  }

  rest(): Buffer {
    return this.buf;
  }
}

/** Method selection message: VER METHOD (RFC 1928 §3). */
export function encodeMethodSelection(method: number): Buffer {
  return Buffer.from([5, method]);
}

/**
 * SOCKS5 reply: VER REP RSV ATYP BND.ADDR BND.PORT (RFC 1928 §6). An IPv4-mapped IPv6 bound
 * address is sent as IPv4; anything that is not an IP literal is sent as 0.0.0.0.
 */
export function encodeSocks5Reply(code: SocksReplyCode, bound?: { address?: string; port?: number }): Buffer {
  const port = bound?.port ?? 0;
  let address = bound?.address ?? '0.0.0.0';
  if (address.toLowerCase().startsWith('::ffff:') && net.isIPv4(address.slice(7))) address = address.slice(7);
  const v6 = net.isIPv6(address) ? ipv6ToBytes(address) : undefined;
  if (v6) {
    const out = Buffer.alloc(22);
    out.set([5, code, 0, ATYP_IPV6]);
    out.set(v6, 4);
    out.writeUInt16BE(port, 20);
    return out;
  }
  const octets = net.isIPv4(address) ? address.split('.').map(Number) : [0, 0, 0, 0];
  const out = Buffer.from([5, code, 0, ATYP_IPV4, ...octets, 0, 0]);
  out.writeUInt16BE(port, 8);
  return out;
}

/** RFC 1929 status reply: VER(0x01) STATUS, 0x00 success; on failure the server closes. */
export function encodeAuthStatus(ok: boolean): Buffer {
  return Buffer.from([0x01, ok ? 0x00 : 0x01]);
}

/** SOCKS4 reply: VN=0 CD DSTPORT DSTIP; the address fields are ignored for CONNECT. */
export function encodeSocks4Reply(granted: boolean): Buffer {
  return Buffer.from([0, granted ? Socks4Reply.granted : Socks4Reply.rejected, 0, 0, 0, 0, 0, 0]);
}
