// How a managed daemon gets its proxy credentials without argv (visible in `ps`), its environment
// (inherited, and readable in /proc by the same user) or state.json (read by every command):
// `connect` writes them to proxies/<id>/proxy-auth (0600, in the 0700 proxy directory) and the
// daemon deletes that file as soon as it has read it. removeTransient() removes a leftover one.
// Credentials `connect` generates itself are also kept in proxies/<id>/client-auth (0600) for as
// long as the proxy lives, so that `connect` can print the lines to paste again.
import { randomBytes } from 'node:crypto';
import { readFileSync, unlinkSync } from 'node:fs';
import type { ProxyCredentials } from '../auth/credentials.js';
import { writePrivateFile } from './private-file.js';
import type { StateLayout } from './paths.js';

export function writeProxyAuthFile(l: StateLayout, id: string, credentials: ProxyCredentials): void {
  const { username, password, source } = credentials;
  writePrivateFile(l.proxyAuthFile(id), `${JSON.stringify({ username, password, source })}\n`);
}

/** Reads and deletes the daemon's credentials; undefined when there are none (auth off). */
export function takeProxyAuthFile(l: StateLayout, id: string): ProxyCredentials | undefined {
  const file = l.proxyAuthFile(id);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  unlinkSync(file);
  let parsed: Partial<ProxyCredentials> | undefined;
  try {
    parsed = JSON.parse(text) as Partial<ProxyCredentials>;
  } catch {
    // Not JSON.parse's message: it quotes the text, which holds the password.
  }
  if (typeof parsed?.username !== 'string' || typeof parsed.password !== 'string') throw new Error(`unreadable proxy credentials in ${file}`);
  return { username: parsed.username, password: parsed.password, source: parsed.source ?? 'file' };
}

/** User name of generated credentials (the password is what keeps others out). */
export const GENERATED_USER = 'proxyout';

/**
 * Random credentials for a managed proxy started without any: 192 bits, base64url, so the
 * password goes into proxy URLs (socks5h://user:pass@…) without percent-encoding.
 */
export function generateCredentials(): ProxyCredentials {
  return { username: GENERATED_USER, password: randomBytes(24).toString('base64url'), source: 'file' };
}

export function writeClientAuthFile(l: StateLayout, id: string, credentials: Pick<ProxyCredentials, 'username' | 'password'>): void {
  const { username, password } = credentials;
  writePrivateFile(l.clientAuthFile(id), `${JSON.stringify({ username, password })}\n`);
}

/** The generated credentials of a running proxy; undefined when it has none (or they are unreadable). */
export function readClientAuthFile(l: StateLayout, id: string): { username: string; password: string } | undefined {
  try {
    const parsed = JSON.parse(readFileSync(l.clientAuthFile(id), 'utf8')) as { username?: unknown; password?: unknown };
    if (typeof parsed.username === 'string' && typeof parsed.password === 'string') return { username: parsed.username, password: parsed.password };
  } catch {
    // absent, or not ours to explain (its text holds the password)
  }
  return undefined;
}
