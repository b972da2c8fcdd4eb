// Upstream apiserver-network-proxy on loopback (docs/real-cluster.md, "Konnectivity"): its
// proxy-server (cmd/server) with the frontend in one mode (grpc or http-connect) over mutual TLS or
// a unix socket, its proxy-agent (cmd/agent) dialling in over mutual TLS to the agent port, and
// backends the agent dials on 127.78.0.x. Certificates are made for each bed. The agent dials
// from this host, so every backend listens on its own loopback address; nothing else is faked.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { SimPki } from '../sim/pki.js';
import { sendDeterministicBytes } from '../sim/backends.js';
import { Components, freePort, tail } from './real-cluster-components.js';
import { binaryPath } from './real-cluster-build.js';
import type { KonnectivitySpec } from '../../src/konnectivity/options.js';

export type UpstreamTransport = 'tls' | 'uds';

/** A backend's address in the "guest" network: what the agent dials. */
export interface Target {
  ip: string;
  port: number;
}

export interface UpstreamBackends {
  /** Echoes what it reads; ends its side when the client's ends. */
  echo: Target;
  /** Once the client has sent anything, `bytesSize` deterministic bytes (sim/backends.ts), then FIN. */
  bytes: Target;
  /** Writes `hello\n`, then FIN, and keeps reading: what arrives after is counted in halfCloseRead. */
  halfClose: Target;
  /** HTTP: `GET /` answers `upstream konnectivity backend`. */
  http: Target;
  /** A loopback address and port where nothing listens: the agent's dial is refused. */
  refused: Target;
}

export interface UpstreamKonnectivity {
  dir: string;
  mode: 'grpc' | 'http-connect';
  transport: UpstreamTransport;
  /** The route's konnectivity block (server, mode, and the client's TLS files for tls). */
  spec: KonnectivitySpec;
  backends: UpstreamBackends;
  bytesSize: number;
  /** Bytes the half-close backend read after its FIN, over all its connections. */
  halfCloseRead(): number;
  /** Connections the backends took (all of them): proof the agent dialled. */
  accepted(): number;
  stopAgent(): Promise<void>;
  /** Starts the agent and waits until the server is ready (it has the agent). */
  startAgent(): Promise<void>;
  /** Stops the server, waits `downMs`, starts it on the same ports, and waits for the agent. */
  restartServer(downMs?: number): Promise<void>;
  /** The last lines of proxy-server.log or proxy-agent.log. */
  logTail(name: 'proxy-server' | 'proxy-agent', lines?: number): string;
  close(): Promise<void>;
}

const BACKEND_IP = { echo: '127.78.0.10', bytes: '127.78.0.11', halfClose: '127.78.0.12', http: '127.78.0.13', refused: '127.78.0.14' } as const;

function listen(server: net.Server, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve((server.address() as net.AddressInfo).port));
  });
}

export async function startUpstreamKonnectivity(
  mode: 'grpc' | 'http-connect',
  transport: UpstreamTransport,
  opts: { bytesSize?: number } = {},
): Promise<UpstreamKonnectivity> {
  const bytesSize = opts.bytesSize ?? 4 * 1024 * 1024;
  const dir = await mkdtemp(path.join(os.tmpdir(), 'proxyout-konn-upstream-'));
  const sockets = new Set<net.Socket>();
  let accepted = 0;
  let afterFin = 0;
  const track = (s: net.Socket) => {
    accepted++;
    sockets.add(s);
    s.on('error', () => {});
    s.on('close', () => sockets.delete(s));
  };
  const echo = net.createServer({ allowHalfOpen: true }, (s) => {
    track(s);
    s.pipe(s);
  });
  // Sends once the client has spoken: a far end that speaks first meets upstream http-connect's
  // race (its 200 may come after the first bytes), which would make the download check a lottery.
  const bytes = net.createServer((s) => {
    track(s);
    s.once('data', () => sendDeterministicBytes(s, bytesSize));
  });
  const halfClose = net.createServer({ allowHalfOpen: true }, (s) => {
    track(s);
    s.end('hello\n');
    s.on('data', (c: Buffer) => (afterFin += c.length));
  });
  const web = http.createServer((_req, res) => res.end('upstream konnectivity backend\n'));
  web.on('connection', track);
  const refused = net.createServer();
  const servers = [echo, bytes, halfClose, web];
  const backends: UpstreamBackends = {
    echo: { ip: BACKEND_IP.echo, port: await listen(echo, BACKEND_IP.echo) },
    bytes: { ip: BACKEND_IP.bytes, port: await listen(bytes, BACKEND_IP.bytes) },
    halfClose: { ip: BACKEND_IP.halfClose, port: await listen(halfClose, BACKEND_IP.halfClose) },
    http: { ip: BACKEND_IP.http, port: await listen(web, BACKEND_IP.http) },
    refused: { ip: BACKEND_IP.refused, port: await listen(refused, BACKEND_IP.refused) },
  };
  await new Promise((r) => refused.close(r));

  // One CA signs all: the frontend's serving cert and our client's, the agent port's and the agent's.
  const pki = new SimPki();
  const files = {
    ca: path.join(dir, 'ca.crt'),
    frontendCert: path.join(dir, 'frontend.crt'),
    frontendKey: path.join(dir, 'frontend.key'),
    clusterCert: path.join(dir, 'cluster.crt'),
    clusterKey: path.join(dir, 'cluster.key'),
    agentCert: path.join(dir, 'agent.crt'),
    agentKey: path.join(dir, 'agent.key'),
    clientCert: path.join(dir, 'client.crt'),
    clientKey: path.join(dir, 'client.key'),
  };
  const frontend = pki.servingCert();
  const cluster = pki.servingCert();
  const agent = pki.clientCert('konnectivity-agent', 'system:nodes');
  const client = pki.clientCert('kubectl-proxyout', 'system:konnectivity');
  await writeFile(files.ca, pki.caPem);
  for (const [cert, key, kc] of [
    [files.frontendCert, files.frontendKey, frontend],
    [files.clusterCert, files.clusterKey, cluster],
    [files.agentCert, files.agentKey, agent],
    [files.clientCert, files.clientKey, client],
  ] as const) {
    await writeFile(cert, kc.certPem);
    await writeFile(key, kc.keyPem, { mode: 0o600 });
  }

  const ports = { server: await freePort(), agent: await freePort(), admin: await freePort(), health: await freePort() };
  const agentPorts = { admin: await freePort(), health: await freePort() };
  const uds = path.join(dir, 'konnectivity-server.socket');
  const serverArgs = [
    `--mode=${mode}`,
    ...(transport === 'uds'
      ? ['--server-port=0', `--uds-name=${uds}`]
      : [
          '--server-bind-address=127.0.0.1',
          `--server-port=${ports.server}`,
          `--server-ca-cert=${files.ca}`,
          `--server-cert=${files.frontendCert}`,
          `--server-key=${files.frontendKey}`,
        ]),
    '--agent-bind-address=127.0.0.1',
    `--agent-port=${ports.agent}`,
    `--cluster-ca-cert=${files.ca}`,
    `--cluster-cert=${files.clusterCert}`,
    `--cluster-key=${files.clusterKey}`,
    '--admin-bind-address=127.0.0.1',
    `--admin-port=${ports.admin}`,
    '--health-bind-address=127.0.0.1',
    `--health-port=${ports.health}`,
    '--server-count=1',
    '--v=2',
  ];
  const agentArgs = [
    '--proxy-server-host=127.0.0.1',
    `--proxy-server-port=${ports.agent}`,
    `--ca-cert=${files.ca}`,
    `--agent-cert=${files.agentCert}`,
    `--agent-key=${files.agentKey}`,
    '--admin-bind-address=127.0.0.1',
    `--admin-server-port=${agentPorts.admin}`,
    '--health-server-host=127.0.0.1',
    `--health-server-port=${agentPorts.health}`,
    '--v=2',
  ];
  const components = new Components(dir, (line) => process.stderr.write(`konnectivity bed: ${line}\n`));
  // Ready: the server answers /readyz 200 only while an agent is connected (pkg/server/readiness_manager.go).
  const serverReady = () =>
    components.waitFor(
      'proxy-server ready with its agent',
      () =>
        new Promise<true | undefined>((resolve) => {
          const req = http.get({ host: '127.0.0.1', port: ports.health, path: '/readyz', timeout: 1_000 }, (res) => {
            res.resume();
            resolve(res.statusCode === 200 ? true : undefined);
          });
          req.on('error', () => resolve(undefined));
          req.on('timeout', () => req.destroy());
        }),
      30_000,
    );
  const launchServer = () => components.launch('proxy-server', binaryPath('v1.37', 'proxy-server'), serverArgs);
  const launchAgent = () => components.launch('proxy-agent', binaryPath('v1.37', 'proxy-agent'), agentArgs);

  launchServer();
  launchAgent();
  try {
    await serverReady();
  } catch (err) {
    await components.stopAll([]);
    throw new Error(`${(err as Error).message}\n${components.logs()}`);
  }
  const spec: KonnectivitySpec =
    transport === 'uds'
      ? { server: `unix://${uds}`, mode }
      : { server: `https://127.0.0.1:${ports.server}`, mode, ca: files.ca, cert: files.clientCert, key: files.clientKey };

  return {
    dir,
    mode,
    transport,
    spec,
    backends,
    bytesSize,
    halfCloseRead: () => afterFin,
    accepted: () => accepted,
    // The agent takes over 5 s to exit on SIGTERM: SIGKILL after 1 s, as abrupt as a pod going away.
    stopAgent: () => components.stop('proxy-agent', 1_000),
    async startAgent() {
      launchAgent();
      await serverReady();
    },
    async restartServer(downMs = 200) {
      await components.stop('proxy-server', 1_000);
      await new Promise((r) => setTimeout(r, downMs));
      launchServer();
      await serverReady();
    },
    logTail: (name, lines = 25) => tail(path.join(dir, `${name}.log`), lines),
    async close() {
      // Neither exits promptly on SIGTERM (the agent takes over 5 s): nothing of theirs is kept.
      await components.stop('proxy-agent', 1_000);
      await components.stop('proxy-server', 1_000);
      await components.stopAll([]);
      for (const s of sockets) s.destroy();
      await Promise.all(servers.map((srv) => new Promise((r) => srv.close(r))));
      await rm(dir, { recursive: true, force: true });
    },
  };
}
