// How a managed daemon gets its proxy credentials without argv (visible in `ps`), its environment
// (inherited, and readable in /proc by the same user) or state.json (read by every command):
// `connect` writes them to proxies/<id>/proxy-auth (0600, in the 0700 proxy directory) and the
// daemon deletes that file as soon as it has read it. removeTransient() removes a leftover one.
import { readFileSync, unlinkSync } from 'node:fs';
import type { ProxyCredentials } from '../auth/credentials.js';
import { writePrivateFile } from './store.js';
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
