// A ProxyStatus (managed/status.ts) for unit tests of what reads one: a running, idle, synced proxy
// unless `over` says otherwise.
import type { ProxyStatus } from '../../src/managed/status.js';

export function proxyStatusFixture(over: Partial<ProxyStatus> = {}): ProxyStatus {
  return {
    id: 'a1',
    state: 'running',
    context: 'prod',
    namespace: 'shop',
    server: 'https://127.0.0.1:6443',
    pid: 42,
    socks: '127.0.0.1:1080',
    http: null,
    createdAt: '',
    startedAt: null,
    uptimeSeconds: 60,
    openStreams: 0,
    totalStreams: 0,
    failedStreams: 0,
    bytesFromClients: 0,
    bytesToClients: 0,
    failuresByReason: {},
    cache: { state: 'synced' },
    logFile: '/tmp/x.log',
    ...over,
  };
}
