import type { AddressInfo } from 'node:net';
import { UNIX_FAMILY } from './unix-socket.js';

/** "host:port" with IPv6 hosts bracketed, as URLs and proxy variables need them; "unix:PATH" for a unix socket. */
export function formatAddress(address: Pick<AddressInfo, 'address' | 'port'> & { family?: string }): string {
  if (address.family === UNIX_FAMILY) return `unix:${address.address}`;
  const host = address.address.includes(':') ? `[${address.address}]` : address.address;
  return `${host}:${address.port}`;
}
