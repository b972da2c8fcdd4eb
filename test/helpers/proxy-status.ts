// A ProxyStatus (managed/status.ts) for unit tests of what reads one: a running, idle, synced proxy
// unless `over` says otherwise.
import type { ProxyStatus } from '../../src/managed/status.js';
import { noStreams } from '../../src/listeners/stream-stats.js';

export function proxyStatusFixture(over: Partial<ProxyStatus> = {}): ProxyStatus {
  return {
    id: 'a1',
    state: 'running',
    context: 'prod',
    namespace: 'shop',
    server: 'https://127.0.0.1:6443',
    version: '1.0.0',
    pid: 42,
    socks: '127.0.0.1:1080',
    http: null,
    createdAt: '',
    startedAt: null,
    uptimeSeconds: 60,
    ...noStreams(),
    cache: { state: 'synced' },
    logFile: '/tmp/x.log',
    ...over,
  };
}
