// proxies/<id>/state.json: what a managed proxy was started with and what it reports back.
// Written atomically (temporary file, then rename) with mode 0600, and only under the state
// lock (lock.ts), so a reader sees either the old or the new content, never half of it.
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ID_PATTERN, validateId, type StateLayout } from './paths.js';
import type { TransportMode } from '../tunnel/negotiate.js';

/** starting: spawned, not ready yet · running: listening, caches synced · stopping: draining ·
 *  failed: the daemon could not start (error says why) · dead: the process is gone (reaped). */
export type Phase = 'starting' | 'running' | 'stopping' | 'failed' | 'dead';

export interface ListenAddress {
  address: string;
  port: number;
  family: string;
}

/** What the daemon is started with (ProxyOptions minus the kubeconfig, context, namespace). */
export interface DaemonOptions {
  listenSocks?: string;
  listenHttp?: string;
  clusterDomain: string;
  logLevel: string;
  connectTimeoutMs: number;
  handshakeTimeoutMs: number;
  shutdownGraceMs: number;
  /** Absent in state written before these flags existed; the daemon then uses the defaults. */
  keepaliveMs?: number;
  keepaliveTimeoutMs?: number;
  maxStreams?: number;
  /** auto | spdy | websocket (absent in entries written before the flag existed: auto). */
  transport?: TransportMode;
  /** Pod-IP targets may reach hostNetwork pods (absent in older entries: false). */
  allowHostNetworkPods?: boolean;
}

export interface ProxyEntry {
  version: 1;
  id: string;
  context: string;
  namespace: string;
  server: string;
  options: DaemonOptions;
  phase: Phase;
  createdAt: string;
  pid?: number;
  /** Process start identity (process.ts), compared before the pid is ever signalled. */
  procIdentity?: string;
  /** When the daemon became ready. */
  startedAt?: string;
  socks?: ListenAddress;
  http?: ListenAddress;
  /** The proxy user when proxy authentication is on (the password is never stored here). */
  proxyAuthUser?: string;
  /** The daemon's one-line startup error (phase failed), or why it was declared dead. */
  error?: string;
}

/** 8 hex characters of sha256(server, context, namespace): the same cluster view, the same ID. */
export function connectionId(server: string, context: string, namespace: string): string {
  return createHash('sha256').update(`${server}\n${context}\n${namespace}`).digest('hex').slice(0, 8);
}

export function readEntry(l: StateLayout, id: string): ProxyEntry | undefined {
  let text: string;
  try {
    text = readFileSync(l.stateFile(id), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT' || (err as NodeJS.ErrnoException).code === 'ENOTDIR') return undefined;
    throw err;
  }
  try {
    const entry = JSON.parse(text) as ProxyEntry;
    if (entry && entry.version === 1 && entry.id === id) return entry;
  } catch {
    /* unreadable: treated as an orphan below */
  }
  return undefined;
}

/** IDs with a directory under proxies/ (a directory without a readable state.json included). */
export function listIds(l: StateLayout): string[] {
  try {
    return readdirSync(l.proxiesDir, { withFileTypes: true })
      .filter((d) => d.isDirectory() && ID_PATTERN.test(d.name))
      .map((d) => d.name)
      .sort();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
}

/** Creates proxies/<id>/ (0700) if needed and writes state.json atomically (0600). */
export function writeEntry(l: StateLayout, entry: ProxyEntry): void {
  validateId(entry.id);
  const dir = l.proxyDir(entry.id);
  mkdirSync(dir, { mode: 0o700, recursive: true });
  chmodSync(dir, 0o700);
  writePrivateFile(l.stateFile(entry.id), `${JSON.stringify(entry, null, 2)}\n`);
}

/** Reads, changes and writes an entry; returns undefined (writing nothing) if it is gone. */
export function updateEntry(l: StateLayout, id: string, change: (e: ProxyEntry) => void): ProxyEntry | undefined {
  const entry = readEntry(l, id);
  if (!entry) return undefined;
  change(entry);
  writePrivateFile(l.stateFile(id), `${JSON.stringify(entry, null, 2)}\n`);
  return entry;
}

/** Writes a file no one else can read: created 0600 under a temporary name, then renamed. */
export function writePrivateFile(file: string, content: string): void {
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  try {
    writeFileSync(tmp, content, { mode: 0o600, flag: 'wx' });
    chmodSync(tmp, 0o600); // in case of an unusual umask
    renameSync(tmp, file);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
}

/** Removes the credentials and the socket but keeps state.json (a "dead" tombstone). */
export function removeTransient(l: StateLayout, id: string): void {
  for (const file of [l.kubeconfigFile(id), l.controlSocket(id), l.proxyAuthFile(id)]) {
    try {
      unlinkSync(file);
    } catch {
      /* already gone */
    }
  }
}

/** Removes proxies/<id>/ entirely (state, kubeconfig, socket). The log stays. */
export function removeEntry(l: StateLayout, id: string): void {
  rmSync(l.proxyDir(id), { recursive: true, force: true });
}
