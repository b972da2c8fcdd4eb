// IP literals and CIDR blocks (RFC 4632 for IPv4, RFC 4291 §2.3 for IPv6 prefixes) and a
// longest-prefix index over them. IPv4-mapped IPv6 addresses (::ffff:a.b.c.d, RFC 4291 §2.5.5.2)
// are IPv4 here, so a client that writes 10.0.0.1 either way gets the same decision.
import net from 'node:net';
import { formatIPv6, ipv6ToBytes } from './address.js';

export interface IpAddress {
  family: 4 | 6;
  /** 4 or 16 bytes, network order. */
  bytes: Uint8Array;
  /** Canonical text: dotted quad, or RFC 5952 for IPv6. */
  text: string;
}

export interface Cidr {
  family: 4 | 6;
  /** The network address (host bits zero). */
  network: Uint8Array;
  prefix: number;
  /** Canonical "network/prefix". */
  text: string;
}

/** An IPv4 or IPv6 literal (brackets tolerated, no zone id), mapped IPv6 taken as IPv4; else undefined. */
export function parseIp(text: string): IpAddress | undefined {
  let t = text;
  if (t.startsWith('[') && t.endsWith(']')) t = t.slice(1, -1);
  if (net.isIPv4(t)) {
    const bytes = Uint8Array.from(t.split('.').map(Number));
    return { family: 4, bytes, text: bytes.join('.') };
  }
  const v6 = ipv6ToBytes(t);
  if (!v6) return undefined;
  if (v6.subarray(0, 10).every((b) => b === 0) && v6[10] === 0xff && v6[11] === 0xff) {
    const bytes = Uint8Array.from(v6.subarray(12));
    return { family: 4, bytes, text: bytes.join('.') };
  }
  return { family: 6, bytes: Uint8Array.from(v6), text: formatIPv6(v6) };
}

/**
 * "10.96.0.0/12", "fd00::/108", or a bare address (a single host: /32 or /128). Throws an Error
 * saying what is wrong; host bits set ("10.96.0.1/12") are refused, as they usually mean a typo.
 * An IPv4-mapped block (::ffff:10.0.0.0/104) is the IPv4 block it maps (10.0.0.0/8).
 */
export function parseCidr(text: string): Cidr {
  const slash = text.indexOf('/');
  const addrText = slash < 0 ? text : text.slice(0, slash);
  const prefixText = slash < 0 ? undefined : text.slice(slash + 1);
  const ip = parseIp(addrText);
  if (!ip || addrText.startsWith('[')) throw new Error(`"${text}" is not a CIDR block (expected e.g. 10.96.0.0/12 or fd00::/108)`);
  const mapped = ip.family === 4 && addrText.includes(':');
  const bits = ip.family === 4 ? 32 : 128;
  let prefix = bits;
  if (prefixText !== undefined) {
    const max = mapped ? 128 : bits;
    if (!/^\d{1,3}$/.test(prefixText) || Number(prefixText) > max) throw new Error(`"${text}": the prefix length must be a number from 0 to ${max}`);
    prefix = Number(prefixText);
    if (mapped) {
      if (prefix < 96) throw new Error(`"${text}": an IPv4-mapped block needs a prefix of at least 96`);
      prefix -= 96;
    }
  }
  const network = maskBytes(ip.bytes, prefix);
  if (!network.every((b, i) => b === ip.bytes[i])) {
    const fixed = formatCidr(ip.family, network, prefix);
    throw new Error(`"${text}" has host bits set; did you mean ${fixed}?`);
  }
  return { family: ip.family, network, prefix, text: formatCidr(ip.family, network, prefix) };
}

function formatCidr(family: 4 | 6, network: Uint8Array, prefix: number): string {
  return `${family === 4 ? network.join('.') : formatIPv6(network)}/${prefix}`;
}

function maskBytes(bytes: Uint8Array, prefix: number): Uint8Array {
  const out = new Uint8Array(bytes.length);
  for (let i = 0; i < bytes.length; i++) {
    const keep = Math.max(0, Math.min(8, prefix - i * 8));
    out[i] = bytes[i]! & ((0xff << (8 - keep)) & 0xff);
  }
  return out;
}

function keyOf(bytes: Uint8Array, prefix: number): string {
  return Buffer.from(maskBytes(bytes, prefix)).toString('hex');
}

/**
 * Longest-prefix match over CIDR blocks: one map per prefix length in use, probed from the
 * longest length down, so a lookup costs at most one probe per distinct prefix length.
 */
export class CidrIndex<T> {
  private readonly byLength: Record<4 | 6, Map<number, Map<string, T>>> = { 4: new Map(), 6: new Map() };
  private lengths: Record<4 | 6, number[]> = { 4: [], 6: [] };

  /** Adds a block; returns the value already stored for exactly that block, if any (not replaced). */
  add(cidr: Cidr, value: T): T | undefined {
    let map = this.byLength[cidr.family].get(cidr.prefix);
    if (!map) {
      map = new Map();
      this.byLength[cidr.family].set(cidr.prefix, map);
      this.lengths[cidr.family] = [...this.byLength[cidr.family].keys()].sort((a, b) => b - a);
    }
    const key = keyOf(cidr.network, cidr.prefix);
    const existing = map.get(key);
    if (existing === undefined) map.set(key, value);
    return existing;
  }

  /** The value of the longest block containing the address, with that block's prefix length. */
  lookup(ip: IpAddress, minPrefix = 0): { value: T; prefix: number } | undefined {
    const maps = this.byLength[ip.family];
    for (const prefix of this.lengths[ip.family]) {
      if (prefix < minPrefix) break;
      const value = maps.get(prefix)!.get(keyOf(ip.bytes, prefix));
      if (value !== undefined) return { value, prefix };
    }
    return undefined;
  }

  get size(): number {
    let n = 0;
    for (const family of [4, 6] as const) for (const m of this.byLength[family].values()) n += m.size;
    return n;
  }
}
