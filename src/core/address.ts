// Host/port text handling shared by the CLI (listen addresses) and the front ends (CONNECT
// authorities, SOCKS addresses). IPv6 text follows RFC 4291 §2.2 on input and RFC 5952 on output,
// so the same address always reaches the core as the same string.
import net from 'node:net';
import type { Destination } from './types.js';

export interface HostPort {
  host: string;
  port: number;
}

// Letters, digits, '-', '.', '_' (the last for names like _svc._tcp that some tools use).
const HOSTNAME_RE = /^[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,252}[A-Za-z0-9_.])?$/;

function parsePort(text: string, allowZero: boolean): number | undefined {
  if (!/^\d{1,5}$/.test(text)) return undefined;
  const port = Number(text);
  if (port > 65535 || (port === 0 && !allowZero)) return undefined;
  return port;
}

/** True for an IPv4/IPv6 literal or a syntactically plausible DNS name. */
export function isValidHost(host: string): boolean {
  return net.isIP(host) !== 0 || HOSTNAME_RE.test(host);
}

/**
 * Parses a listen address: "127.0.0.1:1080", "[::1]:1080", "localhost:0", ":1080" (loopback).
 * Port 0 asks the OS for a free port. Throws an Error whose message says what is wrong.
 */
export function parseListenAddress(s: string): HostPort {
  const text = s.trim();
  const example = 'expected HOST:PORT, e.g. 127.0.0.1:1080, [::1]:1080 or :1080';
  if (text === '') throw new Error(`empty listen address (${example})`);
  let host: string;
  let portText: string;
  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    if (close < 0) throw new Error(`invalid listen address "${s}": missing "]" (${example})`);
    host = text.slice(1, close);
    if (!net.isIPv6(host)) throw new Error(`invalid listen address "${s}": "${host}" is not an IPv6 address`);
    if (text[close + 1] !== ':') throw new Error(`invalid listen address "${s}": missing ":PORT" after "]" (${example})`);
    portText = text.slice(close + 2);
  } else {
    const colon = text.lastIndexOf(':');
    if (colon < 0) throw new Error(`invalid listen address "${s}": missing ":PORT" (${example})`);
    host = text.slice(0, colon);
    portText = text.slice(colon + 1);
    if (host.includes(':')) throw new Error(`invalid listen address "${s}": put IPv6 addresses in brackets, e.g. [::1]:1080`);
    if (host === '') host = '127.0.0.1';
    else if (!isValidHost(host)) throw new Error(`invalid listen address "${s}": "${host}" is not a valid host name or IP address`);
  }
  const port = parsePort(portText, true);
  if (port === undefined) throw new Error(`invalid listen address "${s}": port "${portText}" is not a number from 0 to 65535`);
  return { host, port };
}

/** The host of a client as logs name it: "ip:port" → ip, "[v6]:port" → v6, a word ("unix") itself. */
export function clientHost(client: string): string {
  if (client.startsWith('[')) return client.slice(1, client.indexOf(']'));
  const colon = client.lastIndexOf(':');
  return colon < 0 ? client : client.slice(0, colon);
}

/** "host:port", with brackets around IPv6 literals. */
export function formatHostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/** localhost, *.localhost, 127.0.0.0/8, ::1 and ::ffff:127.0.0.0/104. Brackets are tolerated. */
export function isLoopbackHost(host: string): boolean {
  let h = host.trim().toLowerCase();
  if (h.startsWith('[') && h.endsWith(']')) h = h.slice(1, -1);
  if (h === 'localhost' || h.endsWith('.localhost')) return true;
  if (net.isIPv4(h)) return h.startsWith('127.');
  const bytes = ipv6ToBytes(h);
  if (!bytes) return false;
  if (bytes.subarray(0, 15).every((b) => b === 0) && bytes[15] === 1) return true;
  return isV4Mapped(bytes) && bytes[12] === 127;
}

function isV4Mapped(bytes: Uint8Array): boolean {
  return bytes.subarray(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff;
}

/** The 16 bytes of an IPv6 literal (RFC 4291 §2.2 text forms, no zone id), else undefined. */
export function ipv6ToBytes(text: string): Buffer | undefined {
  if (!net.isIPv6(text) || text.includes('%')) return undefined;
  let s = text;
  const lastColon = s.lastIndexOf(':');
  const v4 = s.slice(lastColon + 1);
  if (v4.includes('.')) {
    // Rewrite an embedded IPv4 tail (::ffff:1.2.3.4) as two hex groups, then parse uniformly.
    const [a, b, c, d] = v4.split('.').map(Number) as [number, number, number, number];
    s = `${s.slice(0, lastColon + 1)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const parse = (part: string): number[] => (part === '' ? [] : part.split(':').map((g) => parseInt(g, 16)));
  const gap = s.indexOf('::');
  const head = parse(gap < 0 ? s : s.slice(0, gap));
  const rest = gap < 0 ? [] : parse(s.slice(gap + 2));
  const missing = 8 - head.length - rest.length;
  if (gap < 0 ? missing !== 0 : missing < 1) return undefined;
  const groups = [...head, ...new Array<number>(missing).fill(0), ...rest];
  if (groups.some((g) => !Number.isInteger(g) || g < 0 || g > 0xffff)) return undefined;
  const out = Buffer.alloc(16);
  groups.forEach((g, i) => out.writeUInt16BE(g, i * 2));
  return out;
}

/**
 * RFC 5952 text for 16 address bytes: lowercase, no leading zeros, the longest run (≥ 2) of zero
 * groups replaced by "::" (the first on a tie), and IPv4-mapped addresses as ::ffff:a.b.c.d (§5).
 */
export function formatIPv6(bytes: Uint8Array): string {
  if (bytes.length !== 16) throw new RangeError('an IPv6 address is 16 bytes');
  if (isV4Mapped(bytes)) return `::ffff:${bytes[12]}.${bytes[13]}.${bytes[14]}.${bytes[15]}`;
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push((bytes[i]! << 8) | bytes[i + 1]!);
  let bestStart = -1;
  let bestLen = 1;
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart < 0) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLen).join(':')}`;
}

/** Canonical (RFC 5952) form of an IPv6 literal, or undefined if it is not one. */
export function canonicalIPv6(text: string): string | undefined {
  const bytes = ipv6ToBytes(text);
  return bytes ? formatIPv6(bytes) : undefined;
}

/**
 * The IPv4 address a name in one of inet_aton's other spellings stands for — `2130706433`,
 * `127.1`, `0x7f.0.0.1`, `0177.0.0.1`, `010.0.0.1` (octal: 8.0.0.1) — or undefined. The system
 * resolver (glibc getaddrinfo → inet_aton) and browsers (the WHATWG URL host parser) read these
 * as addresses, never as names; so must the routing table, or a `cidrs` rule would not apply to
 * what is dialled. One trailing dot is allowed, as the URL parser allows it.
 */
export function inetAton(text: string): string | undefined {
  const parts = (text.endsWith('.') ? text.slice(0, -1) : text).split('.');
  if (parts.length > 4) return undefined;
  const values: number[] = [];
  for (const part of parts) {
    const value = /^0x[0-9a-f]+$/i.test(part)
      ? parseInt(part.slice(2), 16)
      : /^0[0-7]*$/.test(part)
        ? parseInt(part, 8)
        : /^[1-9][0-9]*$/.test(part)
          ? Number(part)
          : NaN;
    if (!Number.isSafeInteger(value)) return undefined;
    values.push(value);
  }
  const last = values.pop()!;
  if (values.some((v) => v > 255) || last >= 2 ** (8 * (4 - values.length))) return undefined;
  const address = values.reduce((acc, v, i) => acc + v * 2 ** (8 * (3 - i)), 0) + last;
  return [address >>> 24, (address >>> 16) & 255, (address >>> 8) & 255, address & 255].join('.');
}

/**
 * A Destination from host text as a client sent it. IP literals are typed as such even when a
 * client sent them as a name (SOCKS5 ATYP 3, HTTP authorities), in any spelling the resolver
 * would read as one (inetAton), so the core has one rule.
 */
export function destinationFor(host: string, port: number): Destination {
  let h = host;
  if (h.startsWith('[') && h.endsWith(']')) h = h.slice(1, -1);
  if (net.isIPv4(h)) return { host: h, port, type: 'ipv4' };
  const v4 = inetAton(h);
  if (v4 !== undefined) return { host: v4, port, type: 'ipv4' };
  const v6 = canonicalIPv6(h);
  if (v6 !== undefined) return { host: v6, port, type: 'ipv6' };
  // A scoped literal (fe80::1%eth0) names an interface of the client's own machine: still an
  // IPv6 address (found by the fuzzer: it used to pass as a domain name), never a cluster one.
  if (net.isIPv6(h)) return { host: h, port, type: 'ipv6' };
  return { host, port, type: 'domain' };
}

/**
 * Parses an HTTP CONNECT authority (RFC 9110 §9.3.6): "host:port" or "[v6]:port", port 1–65535.
 * Returns undefined for anything else.
 */
export function parseAuthority(text: string): Destination | undefined {
  let host: string;
  let portText: string;
  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    if (close < 0 || text[close + 1] !== ':') return undefined;
    host = text.slice(1, close);
    if (ipv6ToBytes(host) === undefined) return undefined;
    portText = text.slice(close + 2);
  } else {
    const colon = text.lastIndexOf(':');
    if (colon <= 0) return undefined;
    host = text.slice(0, colon);
    portText = text.slice(colon + 1);
    if (!isValidHost(host) || host.includes(':')) return undefined;
  }
  const port = parsePort(portText, false);
  return port === undefined ? undefined : destinationFor(host, port);
}

/** Why parseAuthority refused `text`, for the client's 400 (its first 100 characters quoted). */
export function authorityProblem(text: string): string {
  const shown = `"${text.slice(0, 100)}${text.length > 100 ? '…' : ''}"`;
  const colon = text.lastIndexOf(':');
  const host = colon > 0 && !text.startsWith('[') ? text.slice(0, colon) : '';
  if (host && !host.includes(':') && parsePort(text.slice(colon + 1), false) !== undefined && !isValidHost(host)) {
    return host.length > 254
      ? `CONNECT host is ${host.length} characters long; a DNS name has at most 253, 254 with its final dot (${shown})`
      : `CONNECT host is not a DNS name or IP address: letters, digits, "-", "." and "_" only (${shown})`;
  }
  return `CONNECT target must be host:port or [ipv6]:port, port 1-65535, got ${shown}`;
}

/** Why `text`, an IP-looking host, cannot be routed (the one wording for every listener). */
export function unroutableIpMessage(text: string): string {
  const why = text.includes('%') ? ': a scoped IPv6 address names an interface of your own machine' : '';
  return `${text} is not an IP address the proxy can route${why}`;
}

/**
 * The scoped IPv6 literal (fe80::1%eth0) a CONNECT target ("[h]:port", "h:port") or an http://
 * URL (its zone as "%25eth0", RFC 6874) names, if any: parseAuthority and WHATWG URLs refuse
 * zones, yet the client named an address, to be refused as one, not as malformed text.
 */
export function scopedIpv6Literal(text: string): string | undefined {
  const m = /^(?:http:\/\/(?:[^/?#@]*@)?)?\[([^\]]+)\]/i.exec(text) ?? /^([^[\]]+):\d+$/.exec(text);
  const host = m?.[1]!.replace(/%25/, '%');
  return host?.includes('%') && net.isIPv6(host) ? host : undefined;
}

/**
 * A CONNECT target as clients send it: parseAuthority's forms, and an IPv6 literal without
 * brackets ("fd00::1:443"), which wget 1.21 and Python's http.client before 3.12 send. A CONNECT
 * target always has a port, so the last colon starts it.
 */
export function parseConnectTarget(text: string): Destination | undefined {
  const parsed = parseAuthority(text);
  if (parsed || text.startsWith('[')) return parsed;
  const colon = text.lastIndexOf(':');
  const host = text.slice(0, colon);
  if (colon < 0 || !host.includes(':') || ipv6ToBytes(host) === undefined) return undefined;
  const port = parsePort(text.slice(colon + 1), false);
  return port === undefined ? undefined : destinationFor(host, port);
}

/** A port mapping (--forward [ADDR:]LPORT=TARGET:PORT): a local TCP listener for one fixed target. */
export interface ForwardSpec {
  /** Where to listen; ADDR defaults to 127.0.0.1, port 0 picks a free one. */
  listen: HostPort;
  target: Destination;
  /** The text as given, for messages and for comparing a running managed proxy's settings. */
  text: string;
}

/**
 * Parses "[ADDR:]LPORT=TARGET:PORT": "5432=db.shop:5432", "127.0.0.2:0=10.0.0.7:6379",
 * "[::1]:8080=[fd00::7]:80". TARGET is any name or IP a SOCKS client could ask for.
 */
export function parseForwardSpec(s: string): ForwardSpec {
  const text = s.trim();
  const example = 'expected [ADDR:]LPORT=TARGET:PORT, e.g. 5432=db.shop:5432 or 127.0.0.1:0=redis.cache:6379';
  const eq = text.indexOf('=');
  if (eq < 0) throw new Error(`invalid port mapping "${s}": missing "=" (${example})`);
  const left = text.slice(0, eq);
  const right = text.slice(eq + 1);
  let listen: HostPort;
  if (/^\d+$/.test(left)) {
    const port = parsePort(left, true);
    if (port === undefined) throw new Error(`invalid port mapping "${s}": local port "${left}" is not a number from 0 to 65535`);
    listen = { host: '127.0.0.1', port };
  } else {
    try {
      listen = parseListenAddress(left);
    } catch (err) {
      // The listen address's own example (HOST:PORT) would stand beside the mapping's: one is enough.
      const why = (err as Error).message.replace(/^invalid listen address "[^"]*": /, '').replace(/ \(expected HOST:PORT[^)]*\)$/, '');
      throw new Error(`invalid port mapping "${s}": ${why} (${example})`);
    }
  }
  const target = parseAuthority(right);
  if (!target) throw new Error(`invalid port mapping "${s}": target "${right}" is not HOST:PORT with a port from 1 to 65535 (${example})`);
  return { listen, target, text };
}

/** The prefix that makes a listen address a unix socket: unix:PATH (unix: alone / a bare name: in the state directory). */
export const UNIX_PREFIX = 'unix:';

/** The path text of a "unix:…" listen address (possibly empty), or undefined for a TCP one. */
export function unixListenPath(s: string): string | undefined {
  const text = s.trim();
  return text.startsWith(UNIX_PREFIX) ? text.slice(UNIX_PREFIX.length) : undefined;
}

/**
 * Why a mapping may not listen where it asks, or undefined: a plain TCP mapping cannot ask its
 * clients for credentials, so anything but loopback would hand the cluster to whoever reaches it.
 */
export function forwardListenProblem(spec: ForwardSpec): string | undefined {
  if (isLoopbackHost(spec.listen.host)) return undefined;
  return `port mapping "${spec.text}" would listen on ${spec.listen.host}, which is not a loopback address: a port mapping cannot authenticate its clients, so it listens on loopback only (use --listen-socks/--listen-http with --proxy-auth-file for other machines)`;
}
