import { isIP } from 'node:net';

/** Canonical text of an IP (RFC 5952 for IPv6), so "fd00:0::a" and "fd00::a" index alike. */
export function normalizeIp(ip: string): string {
  const bare = ip.startsWith('[') && ip.endsWith(']') ? ip.slice(1, -1) : ip;
  if (isIP(bare) !== 6) return bare;
  try {
    return new URL(`http://[${bare}]/`).hostname.slice(1, -1);
  } catch {
    return bare.toLowerCase();
  }
}
