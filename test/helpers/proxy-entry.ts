// A managed proxy's state entry (managed/store.ts) as `connect` writes it, for tests of the state
// directory and the commands that read it.
import type { ProxyEntry } from '../../src/managed/store.js';

/** An entry for `id` in phase "starting" (no pid yet); `extra` overrides any field. */
export function proxyEntry(id: string, extra: Partial<ProxyEntry> = {}): ProxyEntry {
  return {
    version: 1,
    id,
    context: 'sim',
    namespace: 'shop',
    server: 'https://127.0.0.1:6443',
    options: {
      listenSocks: '127.0.0.1:0',
      clusterDomain: 'cluster.local',
      logLevel: 'info',
      connectTimeoutMs: 15_000,
      handshakeTimeoutMs: 10_000,
      shutdownGraceMs: 4_000,
    },
    phase: 'starting',
    createdAt: new Date().toISOString(),
    ...extra,
  };
}
