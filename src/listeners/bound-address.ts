import type { AddressInfo } from 'node:net';
import { UNIX_FAMILY } from './unix-socket.js';

/** "host:port" with IPv6 hosts bracketed, as URLs and proxy variables need them; "unix:PATH" for a unix socket. */
export function formatAddress(address: Pick<AddressInfo, 'address' | 'port'> & { family?: string }): string {
  if (address.family === UNIX_FAMILY) return `unix:${address.address}`;
  const host = address.address.includes(':') ? `[${address.address}]` : address.address;
  return `${host}:${address.port}`;
}

/**
 * formatAddress's "host:port" as a URL authority (proxy variables, status): a zone id's "%" written
 * "%25" as RFC 6874 has it, since Go's URL parser refuses a bare "%" there and a Go program then
 * ignores the proxy variable (curl and Python read either).
 */
export function urlAuthority(hostPort: string): string {
  return hostPort.replace('%', '%25');
}
