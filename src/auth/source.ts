// Which budget a client address counts against. On Linux any local process can connect from any
// 127.x.y.z, and an IPv6 host usually owns a whole /64 (RFC 4291 §2.5.4, SLAAC), so keying by
// exact address would give one attacker thousands of budgets. Loopback (127.0.0.0/8, ::1 and
// their IPv4-mapped forms) is one source, IPv6 counts per /64, IPv4 per address.
import net from 'node:net';
import { ipv6ToBytes } from '../core/address.js';

export const LOOPBACK_SOURCE = 'loopback';
/** Every client of a unix-socket listener (all of them are this machine's processes of users the socket's mode admits). */
export const UNIX_SOURCE = 'unix';

/** The bucket key of a socket's remoteAddress ("unknown" when the socket has none). */
export function sourceBucket(address: string | undefined): string {
  if (address === undefined || address === '') return 'unknown';
  if (address === UNIX_SOURCE) return UNIX_SOURCE;
  let text = address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address;
  const zone = text.indexOf('%');
  if (zone >= 0) text = text.slice(0, zone);
  if (net.isIPv4(text)) return text.startsWith('127.') ? LOOPBACK_SOURCE : text;
  const bytes = ipv6ToBytes(text);
  if (!bytes) return text;
  const v4Mapped = bytes.subarray(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff;
  if (v4Mapped) return bytes[12] === 127 ? LOOPBACK_SOURCE : `${bytes[12]}.${bytes[13]}.${bytes[14]}.${bytes[15]}`;
  if (bytes.subarray(0, 15).every((b) => b === 0) && bytes[15] === 1) return LOOPBACK_SOURCE;
  const groups: string[] = [];
  for (let i = 0; i < 8; i += 2) groups.push(bytes.readUInt16BE(i).toString(16));
  return `${groups.join(':')}::/64`;
}
