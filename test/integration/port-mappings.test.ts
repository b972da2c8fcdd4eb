// Port mappings (--forward, config `forward:`) with real clients against the simulated cluster:
// redis-cli to a pod whose port is a real redis-server, curl, a raw TCP echo checked by sha256, a
// mapping that keeps working while its only pod is replaced, LPORT 0 reported, refusals.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import net from 'node:net';
import path from 'node:path';
import { eventually, startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { runCli, startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';
import { deterministicBytes } from '../sim/cluster.js';

let cluster: TestCluster;
let redis: ChildProcess | undefined;
let redisPort = 0;
const hasRedis = await new Promise<boolean>((resolve) => execFile('redis-server', ['--version'], (err) => resolve(!err)));

async function freePort(): Promise<number> {
  const s = net.createServer().listen(0, '127.0.0.1');
  await once(s, 'listening');
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

function redisCli(port: number, ...args: string[]): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], { timeout: 20_000 }, (err, stdout, stderr) =>
      err ? reject(new Error(`${err.message} ${stderr}`)) : resolve(stdout.trim()),
    ),
  );
}

/** "kubectl-proxyout: port 127.0.0.1:P → TARGET (…)" → P, for the mapping to TARGET. */
function mappedPort(proxy: ProxyProcess, target: string): number {
  const line = proxy.stdout.find((l) => l.includes(`→ ${target} (`));
  assert.ok(line, `no ready line for ${target}: ${proxy.stdout.join('\n')}`);
  const m = / port 127\.0\.0\.1:(\d+) → /.exec(line);
  assert.ok(m, line);
  return Number(m[1]);
}

/** Sends `data`, half-closes, and returns the sha256 of everything read back until the peer's FIN. */
async function echoDigest(port: number, data: Buffer): Promise<{ digest: string; bytes: number }> {
  const socket = net.connect(port, '127.0.0.1');
  await once(socket, 'connect');
  const hash = createHash('sha256');
  let bytes = 0;
  socket.on('data', (c: Buffer) => {
    hash.update(c);
    bytes += c.length;
  });
  socket.end(data);
  await once(socket, 'end');
  socket.destroy();
  return { digest: hash.digest('hex'), bytes };
}

before(async () => {
  cluster = await startTestCluster();
  if (hasRedis) {
    redisPort = await freePort();
    redis = spawn('redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--protected-mode', 'yes'], {
      stdio: 'ignore',
    });
    await eventually(async () => (await redisCli(redisPort, 'PING')) === 'PONG', 10_000, 100);
    // A pod whose port 6379 is that real redis-server, behind a Service.
    await cluster.sim.createPod({
      namespace: 'cache',
      name: 'redis-0',
      labels: { app: 'redis' },
      ports: [{ name: 'redis', containerPort: 6379, backend: 'external', target: { host: '127.0.0.1', port: redisPort } }],
    });
    await cluster.sim.createService({
      namespace: 'cache',
      name: 'redis',
      selector: { app: 'redis' },
      ports: [{ name: 'redis', port: 6379, targetPort: 6379 }],
    });
  }
});

after(async () => {
  redis?.kill('SIGKILL');
  await cluster?.close();
});

describe('a foreground proxy with mappings', () => {
  let proxy: ProxyProcess;
  before(async () => {
    const config = path.join(cluster.dir, 'forward.yaml');
    // One mapping from the config file (with routes the file does not name: the current context serves).
    writeFileSync(config, 'forward:\n  - "0=hello.default:80"\n');
    proxy = await startProxyProcess([
      '--kubeconfig',
      cluster.kubeconfig,
      '--config',
      config,
      '--listen-socks',
      '127.0.0.1:0',
      '--forward',
      '0=web.shop:8080',
      '--forward',
      '127.0.0.1:0=echo.data:7000',
      '--forward',
      '0=nothing-here.shop:80',
      '--forward',
      'localhost:0=web.shop.svc:8080',
      ...(hasRedis ? ['--forward', '0=redis.cache:6379'] : []),
    ]);
  });
  after(async () => {
    await proxy?.stop();
  });

  test('LPORT 0: each ready line carries the bound port and a paste-ready example', () => {
    const web = mappedPort(proxy, 'web.shop:8080');
    assert.ok(web > 0);
    assert.ok(proxy.stdout.includes(`kubectl-proxyout: port 127.0.0.1:${web} → web.shop:8080 (curl http://127.0.0.1:${web}/)`), proxy.stdout.join('\n'));
    const echo = mappedPort(proxy, 'echo.data:7000');
    assert.ok(proxy.stdout.some((l) => l.endsWith(`(nc 127.0.0.1 ${echo})`)));
    if (hasRedis) assert.ok(proxy.stdout.some((l) => l.endsWith(`(redis-cli -p ${mappedPort(proxy, 'redis.cache:6379')})`)));
    // The config file's mapping is there too.
    assert.ok(mappedPort(proxy, 'hello.default:80') > 0);
  });

  test(
    'redis-cli SET/GET through a mapping reaches the real redis-server in the pod',
    { skip: hasRedis ? false : 'redis-server not installed (apt-get install redis-server redis-tools)' },
    async () => {
      const port = mappedPort(proxy, 'redis.cache:6379');
      assert.equal(await redisCli(port, 'SET', 'proxyout:key', 'through-a-mapping'), 'OK');
      assert.equal(await redisCli(port, 'GET', 'proxyout:key'), 'through-a-mapping');
      // And it really is that server: read back directly.
      assert.equal(await redisCli(redisPort, 'GET', 'proxyout:key'), 'through-a-mapping');
      const opened = proxy.logs.find((l) => l.msg === 'stream open' && l.frontEnd === 'forward' && l.target === 'redis.cache:6379');
      assert.ok(opened, 'the stream is logged as a forward stream');
      assert.match(String(opened.via), /^cache\/redis-0:6379$/);
    },
  );

  test('curl through a mapping, spread over the Service’s ready pods', async () => {
    const port = mappedPort(proxy, 'web.shop:8080');
    const pods = new Set<string>();
    for (let i = 0; i < 12; i++) {
      const r = await curl([`http://127.0.0.1:${port}/whoami`]);
      assert.equal(r.code, 0, r.stderr);
      pods.add((JSON.parse(r.stdout) as { pod: string }).pod);
    }
    assert.ok(pods.size > 1, `one pod only: ${[...pods].join(',')}`);
  });

  test('localhost: one port on 127.0.0.1 and ::1 both, as kubectl port-forward binds it', async () => {
    const port = mappedPort(proxy, 'web.shop.svc:8080');
    assert.ok(proxy.stdout.includes(`kubectl-proxyout: port [::1]:${port} → web.shop.svc:8080 (curl http://[::1]:${port}/)`), proxy.stdout.join('\n'));
    for (const host of ['127.0.0.1', '[::1]']) {
      const r = await curl([`http://${host}:${port}/whoami`]);
      assert.equal(r.code, 0, `${host}: ${r.stderr}`);
      assert.match(r.stdout, /"pod"/);
    }
  });

  test('raw TCP echo: 4 MiB out and back, same sha256, request and FIN sent at once', async () => {
    const port = mappedPort(proxy, 'echo.data:7000');
    const data = deterministicBytes(4 << 20);
    const got = await echoDigest(port, data);
    assert.equal(got.bytes, data.length);
    assert.equal(got.digest, createHash('sha256').update(data).digest('hex'));
  });

  test('a short request sent with its FIN at once (printf … | nc -N) still gets its answer', async () => {
    // The first connection to this pod: its tunnel is opened for it, so the request and FIN are
    // read long before the stream exists. A FIN must not count as the client leaving.
    const port = mappedPort(proxy, 'hello.default:80');
    for (let i = 0; i < 3; i++) {
      const socket = net.connect(port, '127.0.0.1');
      await once(socket, 'connect');
      let answer = '';
      socket.setEncoding('utf8').on('data', (c: string) => (answer += c));
      socket.end('GET / HTTP/1.0\r\nHost: hello.default\r\n\r\n');
      await once(socket, 'end');
      socket.destroy();
      assert.match(answer, /^HTTP\/1\.1 200 OK\r\n[\s\S]*hello from hello-/, `round ${i}: ${JSON.stringify(answer)}`);
    }
  });

  test('a target that cannot be opened: the client connection is closed and the failure logged once, as forward', async () => {
    const port = mappedPort(proxy, 'nothing-here.shop:80');
    const socket = net.connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    await once(socket, 'close');
    assert.equal(Buffer.concat(chunks).length, 0, 'nothing is written: the mapping has no protocol to say why');
    const failed = await eventually(async () => proxy.logs.find((l) => l.msg?.toString().startsWith('stream failed') && l.frontEnd === 'forward'));
    assert.equal(failed.target, 'nothing-here.shop:80');
  });
});

test('a mapping keeps working while its only pod is deleted and replaced: new connections reach the new pod', async () => {
  const { sim } = cluster;
  await sim.createPod({ namespace: 'rollout', name: 'app-a', labels: { app: 'app' }, ports: [{ name: 'http', containerPort: 8080, backend: 'http' }] });
  await sim.createService({ namespace: 'rollout', name: 'app', selector: { app: 'app' }, ports: [{ name: 'http', port: 80, targetPort: 8080 }] });
  const proxy = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--forward', '0=app.rollout:80']);
  try {
    const port = mappedPort(proxy, 'app.rollout:80');
    const whoami = async () => {
      const r = await curl([`http://127.0.0.1:${port}/whoami`]);
      return r.code === 0 ? (JSON.parse(r.stdout) as { pod: string }).pod : `curl ${r.code}`;
    };
    assert.equal(await whoami(), 'app-a');
    await sim.deletePod('rollout', 'app-a');
    await sim.createPod({ namespace: 'rollout', name: 'app-b', labels: { app: 'app' }, ports: [{ name: 'http', containerPort: 8080, backend: 'http' }] });
    await eventually(async () => (await whoami()) === 'app-b', 15_000, 200);
    // The same listener, still there: several more connections all reach the new pod.
    for (let i = 0; i < 3; i++) assert.equal(await whoami(), 'app-b');
  } finally {
    await proxy.stop();
  }
});

describe('refused mappings', () => {
  test('a non-loopback ADDR is refused outright, even with proxy credentials', async () => {
    const auth = path.join(cluster.dir, 'auth');
    writeFileSync(auth, 'u:p\n', { mode: 0o600 });
    const r = await runCli([
      '--kubeconfig',
      cluster.kubeconfig,
      '--listen-socks',
      '127.0.0.1:0',
      '--proxy-auth-file',
      auth,
      '--forward',
      '0.0.0.0:0=web.shop:8080',
    ]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(
      r.stderr,
      /^Error: --forward 0\.0\.0\.0:0=web\.shop:8080: port mapping .* not a loopback address: a port mapping cannot authenticate its clients/m,
    );
  });

  test('a malformed mapping is a one-line error', async () => {
    const r = await runCli(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--forward', '5432=db.shop']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /^Error: --forward 5432=db\.shop: invalid port mapping "5432=db\.shop": target "db\.shop" is not HOST:PORT/m);
  });

  test('a bad config-file mapping names the file, the line and the key', async () => {
    const config = path.join(cluster.dir, 'bad-forward.yaml');
    writeFileSync(config, 'direct: false\nforward:\n  - "5432=db.shop:5432"\n  - "10.1.2.3:80=web.shop:8080"\n');
    const r = await runCli(['--kubeconfig', cluster.kubeconfig, '--config', config, '--listen-socks', '127.0.0.1:0']);
    assert.equal(r.code, 1);
    assert.match(
      r.stderr,
      new RegExp(
        `^Error: ${config.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:4: forward\\[1\\]: port mapping "10\\.1\\.2\\.3:80=web\\.shop:8080" would listen on 10\\.1\\.2\\.3, which is not a loopback address`,
        'm',
      ),
    );
  });
});

test('a reload (SIGHUP) keeps the running mappings and warns when the file changed them', async () => {
  const config = path.join(cluster.dir, 'reload-forward.yaml');
  writeFileSync(config, 'forward:\n  - "0=web.shop:8080"\n');
  const proxy = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--config', config, '--listen-socks', '127.0.0.1:0']);
  try {
    const port = mappedPort(proxy, 'web.shop:8080');
    writeFileSync(config, 'forward:\n  - "0=api.shop:80"\n');
    // At once: serve handles SIGHUP from the moment it prints its ready lines.
    proxy.proc.kill('SIGHUP');
    const warned = await eventually(async () => proxy.logs.find((l) => String(l.msg).startsWith('the config file changed its port mappings'))).catch(
      (err: Error) => assert.fail(`${err.message}; exit ${proxy.proc.exitCode} ${proxy.proc.signalCode}; ${proxy.stderr().slice(-600)}`),
    );
    assert.deepEqual(warned.running, ['0=web.shop:8080']);
    assert.deepEqual(warned.file, ['0=api.shop:80']);
    const r = await curl([`http://127.0.0.1:${port}/whoami`]);
    assert.equal(r.code, 0, r.stderr);
    assert.match((JSON.parse(r.stdout) as { pod: string }).pod, /^web-/);
  } finally {
    await proxy.stop();
  }
});

test('reload ID says the config file changed its port mappings, which the managed proxy keeps, each time until the file matches again', async () => {
  const stateDir = mkdtempSync(path.join(tmpdir(), 'pxm-'));
  const cli = (args: string[]) => runCli(args, { env: { KUBECTL_PROXYOUT_STATE_DIR: stateDir }, timeoutMs: 60_000 });
  const config = path.join(cluster.dir, 'reload-managed-forward.yaml');
  const table = (forward: string) => `forward: ["${forward}"]\nroutes:\n  - { name: sim, kind: cluster, context: sim }\n`;
  writeFileSync(config, table('0=web.shop:8080'));
  const id = 'mapreload';
  const c = await cli([
    'connect',
    '--kubeconfig',
    cluster.kubeconfig,
    '--config',
    config,
    '--listen-socks',
    '127.0.0.1:0',
    '--id',
    id,
    '--shutdown-grace',
    '0',
  ]);
  assert.equal(c.code, 0, c.stderr);
  try {
    const kept =
      /port mappings changed \(running: 0=web\.shop:8080; file: 0=api\.shop:80\): a reload keeps the running ones; disconnect mapreload and connect again/;
    writeFileSync(config, table('0=api.shop:80'));
    const first = await cli(['reload', id]);
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stderr.replace(/\s*›\s*/g, ' '), kept);
    // Still the running ones the next time: the daemon did not record the file's as its own.
    const second = await cli(['reload', id]);
    assert.match(second.stderr.replace(/\s*›\s*/g, ' '), kept);
    writeFileSync(config, table('0=web.shop:8080'));
    const back = await cli(['reload', id]);
    assert.equal(back.code, 0, back.stderr);
    assert.doesNotMatch(back.stderr, /port mappings changed/);
  } finally {
    await cli(['disconnect', id]);
    rmSync(stateDir, { recursive: true, force: true });
  }
});
