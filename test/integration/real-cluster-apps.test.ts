// Application protocols of other shapes than request-answer, end to end through the proxy on the
// real control plane, under both transports (the node stand-in's apps.go images): a server-first
// protocol (an SMTP-like banner before the client says anything), a server that closes its write
// side first and reads on, TLS to an in-cluster Service with the Service's name as SNI and the
// certificate checked by curl (HTTP/1.1 and h2), gRPC over h2c from a Go client (unary and
// bidirectional streams on one connection), OpenSSH with nc as its ProxyCommand (these three
// through SOCKS5 and HTTP CONNECT), server-sent events and 128 MiB each way through the HTTP
// proxy's absolute form, and WebSocket echo.
// Skips with a reason when the real-cluster binaries are not built.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import http from 'node:http';
import { createHash, randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { WebSocket } from 'ws';
import { SocksProxyAgent } from 'socks-proxy-agent';
import { skipUnlessRealCluster, type RealCluster } from '../helpers/real-cluster.js';
import { binaryPath } from '../helpers/real-cluster-build.js';
import { manifests, pod, service } from '../helpers/real-cluster-objects.js';
import { endpointSlicesCaughtUp, startClusterLogged, startProxies, stopProxiesAndCluster } from '../helpers/real-cluster-setup.js';
import type { ProxyProcess } from '../helpers/proxy-process.js';
import { socks5Connect, Reader } from '../helpers/socks-client.js';
import { curl } from '../helpers/curl.js';
import { SimPki } from '../sim/pki.js';

const skip = skipUnlessRealCluster();

const TRANSPORTS = ['spdy', 'websocket'] as const;
type Transport = (typeof TRANSPORTS)[number];

const pki = new SimPki();
const tlsCert = pki.hostCert(['secure.shop.svc', 'secure.shop.svc.cluster.local']);

const OBJECTS = [
  pod({
    name: 'mail',
    containers: [
      { name: 'smtp', image: 'proxyout/banner', ports: [{ name: 'smtp', containerPort: 2525 }] },
      { name: 'sink', image: 'proxyout/halfclose', ports: [{ name: 'sink', containerPort: 2600 }] },
    ],
  }),
  service('mail', {
    ports: [
      { name: 'smtp', port: 25, targetPort: 'smtp' },
      { name: 'sink', port: 26, targetPort: 'sink' },
    ],
  }),
  pod({
    name: 'secure',
    containers: [
      {
        name: 'https',
        image: 'proxyout/https',
        env: [
          { name: 'TLS_CERT', value: tlsCert.certPem },
          { name: 'TLS_KEY', value: tlsCert.keyPem },
        ],
        ports: [{ name: 'https', containerPort: 8443 }],
      },
    ],
  }),
  service('secure', { ports: [{ name: 'https', port: 443, targetPort: 'https' }] }),
  pod({ name: 'rpc', containers: [{ name: 'grpc', image: 'proxyout/grpc', ports: [{ name: 'grpc', containerPort: 50051 }] }] }),
  service('rpc', { ports: [{ name: 'grpc', port: 50051, targetPort: 'grpc' }] }),
  pod({ name: 'shell', containers: [{ name: 'sshd', image: 'proxyout/sshd', ports: [{ name: 'ssh', containerPort: 2222 }] }] }),
  service('shell', { ports: [{ name: 'ssh', port: 22, targetPort: 'ssh' }] }),
  pod({ name: 'chat', containers: [{ name: 'ws', image: 'proxyout/ws', ports: [{ name: 'ws', containerPort: 8080 }] }] }),
  service('chat', { ports: [{ name: 'ws', port: 80, targetPort: 'ws' }] }),
];

let cluster: RealCluster | undefined;
let proxies = new Map<Transport, ProxyProcess>();
let caFile = '';
let sshKey = '';

/** A command's stdout (stdin from `input`); rejects on a non-zero exit, with its stderr. */
function run(cmd: string, args: string[], input?: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const child = execFile(cmd, args, { encoding: 'buffer', maxBuffer: 64 << 20, timeout: 60_000 }, (err, stdout, stderr) =>
      err ? reject(new Error(`${cmd}: ${err.message}\n${stderr.toString()}`)) : resolve(stdout),
    );
    child.stdin!.end(input);
  });
}

before(async () => {
  if (skip) return;
  cluster = await startClusterLogged();
  caFile = path.join(cluster.dir, 'apps-ca.pem');
  await writeFile(caFile, pki.caPem);
  await cluster.kubectl(['apply', '-f', '-'], { input: manifests(...OBJECTS) });
  await cluster.kubectl(['-n', 'shop', 'wait', '--for=condition=Ready', 'pod/mail', 'pod/secure', 'pod/rpc', 'pod/chat', 'pod/shell', '--timeout=60s']);
  // Ready pods are ready endpoints only once the EndpointSlice controller says so (later, when loaded).
  await endpointSlicesCaughtUp(cluster);
  sshKey = path.join(cluster.dir, 'apps-ssh-key');
  await run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', sshKey]);
  proxies = await startProxies(cluster, TRANSPORTS);
});

after(async () => {
  const codes = await stopProxiesAndCluster(cluster, proxies);
  for (const code of codes) assert.equal(code, 0, 'the proxy exits 0 on SIGTERM');
});

const proxyOf = (t: Transport) => proxies.get(t)!;

/** A line the server sent (up to \n), read from the reader. */
async function line(reader: Reader): Promise<string> {
  let out = '';
  for (;;) {
    const c = (await reader.read(1)).toString();
    if (c === '\n') return out.replace(/\r$/, '');
    out += c;
  }
}

for (const transport of TRANSPORTS) {
  test(`${transport}: a server-first protocol greets a client that has sent nothing`, { skip }, async () => {
    const { reply, socket, rest } = await socks5Connect(proxyOf(transport).socks!, 'mail', 25);
    assert.equal(reply, 0);
    socket.unshift(rest);
    const reader = new Reader(socket);
    assert.equal(await line(reader), '220 mail ESMTP proxyout', 'the banner comes before any client byte');
    socket.write('EHLO client.example\r\n');
    assert.equal(await line(reader), '250 EHLO client.example');
    socket.write('QUIT\r\n');
    assert.equal(await line(reader), '221 bye');
    socket.destroy();
  });

  test(`${transport}: the banner through HTTP CONNECT`, { skip }, async () => {
    const out = await new Promise<string>((resolve, reject) => {
      // curl's telnet-ish mode: CONNECT, then what the server says until it closes.
      execFile(
        'curl',
        ['--silent', '--max-time', '15', '--proxytunnel', '-x', `http://${proxyOf(transport).http}`, 'telnet://mail.shop:25'],
        { encoding: 'utf8' },
        (err, stdout) => (err && !stdout ? reject(err) : resolve(stdout)),
      ).stdin!.end('QUIT\r\n');
    });
    assert.match(out, /^220 mail ESMTP proxyout\r\n221 bye\r\n$/);
  });

  test(`${transport}: a server that closes its write side first still gets the client's upload`, { skip }, async () => {
    // The runtime passes the pod's FIN on only once both directions are done (containerd's copy
    // loop, which then gives the other direction a second): the upload goes at once.
    const id = `${transport}-${Date.now()}`;
    const body = randomBytes(64 << 10);
    const { reply, socket, rest } = await socks5Connect(proxyOf(transport).socks!, 'mail', 26);
    assert.equal(reply, 0);
    socket.unshift(rest);
    const reader = new Reader(socket);
    assert.equal(await line(reader), 'hello mail');
    socket.end(Buffer.concat([Buffer.from(`${id}\n`), body]));
    assert.equal((await reader.readAll()).length, 0, 'nothing more, then the end');
    const check = await socks5Connect(proxyOf(transport).socks!, 'mail', 25);
    check.socket.unshift(check.rest);
    const checkReader = new Reader(check.socket);
    assert.equal(await line(checkReader), '220 mail ESMTP proxyout');
    check.socket.write(`RESULT ${id}\r\n`);
    assert.equal(await line(checkReader), `250 ${body.length} ${createHash('sha256').update(body).digest('hex')}`, 'the pod read all of it after its FIN');
    check.socket.destroy();
  });

  for (const [via, proxyArg] of [
    ['SOCKS5', (p: ProxyProcess) => `socks5h://${p.socks}`],
    ['HTTP CONNECT', (p: ProxyProcess) => `http://${p.http}`],
  ] as const) {
    test(`${transport}: TLS to a Service by its name, verified, HTTP/1.1 and h2, through ${via}`, { skip }, async () => {
      for (const [flag, proto] of [
        ['--http1.1', 'HTTP/1.1'],
        ['--http2', 'HTTP/2.0'],
      ]) {
        const r = await curl(['--cacert', caFile, flag, '-x', proxyArg(proxyOf(transport)), 'https://secure.shop.svc/']);
        assert.equal(r.code, 0, r.stderr);
        assert.equal(r.stdout, `pod=secure proto=${proto} sni=secure.shop.svc\n`);
      }
    });

    test(`${transport}: OpenSSH to a pod through ${via} (nc as ProxyCommand): a command, and 8 MiB through cat`, { skip }, async () => {
      const p = proxyOf(transport);
      const nc = via === 'SOCKS5' ? `nc -X 5 -x ${p.socks} %h %p` : `nc -X connect -x ${p.http} %h %p`;
      const base = ['-F', 'none', '-i', sshKey, '-o', 'IdentitiesOnly=yes', '-o', 'BatchMode=yes', '-o', 'StrictHostKeyChecking=no'];
      const opts = [...base, '-o', 'UserKnownHostsFile=/dev/null', '-o', 'LogLevel=ERROR', '-o', `ProxyCommand=${nc}`, 'app@shell.shop'];
      assert.equal((await run('ssh', [...opts, 'hello'])).toString(), 'pod=shell cmd=hello\n');
      const body = randomBytes(8 << 20);
      const echoed = await run('ssh', [...opts, 'cat'], body);
      assert.equal(createHash('sha256').update(echoed).digest('hex'), createHash('sha256').update(body).digest('hex'));
    });

    test(`${transport}: gRPC unary calls and 16 bidirectional streams on one h2c connection, through ${via}`, { skip }, async () => {
      const p = proxyOf(transport);
      const args = ['--target', 'rpc.shop:50051', '--unary', '20', '--streams', '16', '--messages', '40', '--size', '32768'];
      args.push(...(via === 'SOCKS5' ? ['--socks', p.socks!] : ['--http-proxy', `http://${p.http}`]));
      const out = await new Promise<string>((resolve, reject) =>
        execFile(binaryPath('v1.37', 'proxyout-grpc-client'), args, { encoding: 'utf8', timeout: 90_000 }, (err, stdout) =>
          err ? reject(new Error(`${err.message}\n${stdout}`)) : resolve(stdout),
        ),
      );
      assert.match(out, /^ok unary=20 streams=16 /);
      console.log(`# ${transport} ${via}: ${out.trim()}`);
    });
  }

  test(`${transport}: server-sent events through the HTTP proxy (absolute form) come as sent, not at the end`, { skip }, async () => {
    const [host, port] = proxyOf(transport).http!.split(':');
    const t0 = Date.now();
    const arrivals = await new Promise<Array<{ ms: number; text: string }>>((resolve, reject) => {
      const req = http.get({ host, port: Number(port), path: 'http://chat.shop/events?n=3&every=1s' }, (res) => {
        assert.equal(res.headers['content-type'], 'text/event-stream');
        const out: Array<{ ms: number; text: string }> = [];
        res.setEncoding('utf8');
        res.on('data', (text: string) => out.push({ ms: Date.now() - t0, text }));
        res.on('end', () => resolve(out));
        res.on('error', reject);
      });
      req.on('error', reject);
    });
    assert.equal(arrivals.map((a) => a.text).join(''), 'data: 0\n\ndata: 1\n\ndata: 2\n\n');
    // Sent a second apart: held back until the end, they would come within a few ms of each other.
    const spread = arrivals[arrivals.length - 1]!.ms - arrivals[0]!.ms;
    assert.ok(spread >= 1_000, `the first event came ${spread} ms before the last, not as it was sent`);
  });

  test(`${transport}: 128 MiB up and down through the HTTP proxy (absolute form), checksummed`, { skip }, async () => {
    const [host, port] = proxyOf(transport).http!.split(':');
    const body = randomBytes(128 << 20);
    const uploaded = await new Promise<string>((resolve, reject) => {
      const req = http.request({ host, port: Number(port), method: 'POST', path: 'http://chat.shop/upload' }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (t: string) => (text += t));
        res.on('end', () => resolve(text));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(body);
    });
    assert.equal(uploaded, `${body.length} ${createHash('sha256').update(body).digest('hex')}\n`);
    const size = 128 << 20;
    const downloaded = await new Promise<{ bytes: number; sha: string }>((resolve, reject) => {
      http
        .get({ host, port: Number(port), path: `http://chat.shop/download?bytes=${size}` }, (res) => {
          const hash = createHash('sha256');
          let bytes = 0;
          res.on('data', (c: Buffer) => {
            hash.update(c);
            bytes += c.length;
          });
          res.on('end', () => resolve({ bytes, sha: hash.digest('hex') }));
          res.on('error', reject);
        })
        .on('error', reject);
    });
    // The server repeats one 64 KiB buffer of 'a'..'z' (the cycle starts again in each).
    const chunk = Buffer.alloc(64 << 10, 'abcdefghijklmnopqrstuvwxyz');
    const expected = createHash('sha256');
    for (let i = 0; i < size / chunk.length; i++) expected.update(chunk);
    assert.deepEqual(downloaded, { bytes: size, sha: expected.digest('hex') });
  });

  test(`${transport}: WebSocket echo through SOCKS5 (ws client, 200 messages of 0–64 KiB)`, { skip }, async () => {
    const ws = new WebSocket('ws://chat.shop/socket', { agent: new SocksProxyAgent(`socks5h://${proxyOf(transport).socks}`) });
    await new Promise((resolve, reject) => {
      ws.once('open', resolve);
      ws.once('error', reject);
    });
    for (let i = 0; i < 200; i++) {
      const msg = randomBytes((i * 331) % (64 << 10));
      const echoed = new Promise<Buffer>((r) => ws.once('message', (d: Buffer) => r(d)));
      ws.send(msg);
      assert.deepEqual(await echoed, msg, `message ${i}`);
    }
    ws.close();
    await new Promise((r) => ws.once('close', r));
  });
}
