// A stand-in Kubernetes API server on loopback for the watch clients' failure handling: the test
// answers each request itself (status codes, stalls, hung watches) where the simulated cluster
// has no switch for it. Plain HTTP; ApiConnection talks to it as to any server.
import http from 'node:http';
import { once } from 'node:events';
import { KubeConfig } from '@kubernetes/client-node';
import { ApiConnection } from '../../src/cluster/api.js';

export interface FakeApi {
  api: ApiConnection;
  requests: URL[];
  /** TCP connections the server accepted. */
  connections(): number;
  close(): Promise<void>;
}

/** A Status object with `code`, as the API server sends for errors. */
export function sendStatus(res: http.ServerResponse, code: number, message: string): void {
  res.writeHead(code, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', code, message }));
}

export async function startFakeApi(handler: (url: URL, res: http.ServerResponse) => void): Promise<FakeApi> {
  const requests: URL[] = [];
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://api');
    requests.push(url);
    handler(url, res);
  });
  let connections = 0;
  server.on('connection', () => connections++);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'fake', server: `http://127.0.0.1:${(server.address() as { port: number }).port}`, skipTLSVerify: true }],
    users: [{ name: 'u', token: 'test-token' }],
    contexts: [{ name: 'fake', cluster: 'fake', user: 'u' }],
    currentContext: 'fake',
  });
  return {
    api: new ApiConnection(kc),
    requests,
    connections: () => connections,
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}
