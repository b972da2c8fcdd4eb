// The chain connection's life over real sockets, against ssh2's own SSH server on loopback
// (test/helpers/ssh2-server.ts): the timings a real sshd cannot be made to hit on cue — a stream
// abandoned while its channel is being opened, close() during a login, a hop that ends every
// session right after login, an API connection (`via`) cut mid-response, a hop gone silent, a
// key the hop accepts and that cannot sign.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import https from 'node:https';
import type { IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { createLogger } from '../../src/core/log.js';
import type { ParsedKey } from 'ssh2';
import { SshChainConnection } from '../../src/ssh/connection.js';
import { ssh2 } from '../../src/ssh/ssh2-lib.js';
import { agentThrough } from '../../src/cluster/dial-agent.js';
import { SimPki } from '../sim/pki.js';
import { eventually, startSsh2Server } from '../helpers/ssh2-server.js';
import { writeUntilStalled } from '../helpers/streams.js';
import { startFreezableProxy } from '../helpers/freezable-proxy.js';

/** `p`, or `late` after `ms`; the timer is cleared once decided (left running, it kept the file's process alive after its last test). */
function bounded<T, L>(p: Promise<T>, ms: number, late: L): Promise<T | L> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<L>((r) => (timer = setTimeout(() => r(late), ms)))]).finally(() => clearTimeout(timer));
}

const agentUnavailable = spawnSync('sh', ['-c', 'command -v ssh-agent']).status === 0 ? undefined : 'ssh-agent is not installed';
/** pino's levels. */
const [DEBUG, INFO, WARN] = [20, 30, 40];

test('a stream abandoned while the hop opens its channel: the channel is closed when it arrives', async () => {
  const server = await startSsh2Server({ openDelayMs: 400 });
  const chain = new SshChainConnection([server.hop()]);
  try {
    await chain.connect();
    const gone = AbortSignal.timeout(50);
    await assert.rejects(chain.dial('example.test', 80, gone), /opening example\.test:80 through hop timed out/);
    // The hop confirms the channel later; left open, it would hold its TCP connection to the
    // destination for as long as the chain lives.
    await eventually(() => server.channelsOpened === 1, 5000, 'the hop never opened the channel');
    await eventually(() => server.channels.size === 0, 2000, 'the abandoned channel was left open on the hop');
    assert.equal(chain.status().state, 'up');
    assert.equal(chain.status().channels, 0);
  } finally {
    await chain.close();
    await server.close();
  }
});

test('close() during a login: the login is ended, not kept alive by a chain that is gone', async () => {
  const server = await startSsh2Server({ authDelayMs: 400 });
  const chain = new SshChainConnection([server.hop()]);
  try {
    const connecting = chain.connect();
    const failed = assert.rejects(connecting, /the ssh route to hop is closed/);
    await eventually(() => server.connections.size === 1, 5000, 'no connection reached the hop');
    await chain.close();
    assert.equal(chain.status().state, 'closed');
    await failed;
    // The hop sees the session go, whether it was still logging in or had just finished: nothing
    // keeps an SSH connection (and its keepalive timer) for a closed route.
    await eventually(() => server.connections.size === 0, 3000, 'the session logged in after close() stayed open');
    assert.equal(chain.status().state, 'closed');
  } finally {
    await server.close();
  }
});

test('a hop that ends every session right after login is retried with backoff, not at once each time', async () => {
  const server = await startSsh2Server({ endAfterLoginMs: 20 });
  const chain = new SshChainConnection([server.hop()], { initialBackoffMs: 200, maxBackoffMs: 1000 });
  try {
    await chain.connect();
    await new Promise((r) => setTimeout(r, 2500));
    // Logins at about 0, 0.2, 0.6, 1.4 and 2.4 s (each drop waits 200, 400, 800, 1000 ms, plus
    // the login itself, slower on a loaded 2-core machine); a chain that reconnected at every drop
    // logged in dozens of times.
    assert.ok(server.logins >= 2 && server.logins <= 6, `${server.logins} logins in 2.5 s`);
    assert.match(chain.status().lastError ?? '', /ssh hop hop .*the connection dropped/);
  } finally {
    await chain.close();
    await server.close();
  }
});

test('a chain that stayed up a while and drops is opened again at once (a network change), backoff reset', async () => {
  const server = await startSsh2Server({ endAfterLoginMs: 400 });
  // Up for 300 ms counts as stable here (30 s by default): each drop, 400 ms after its login,
  // reconnects at once, though the backoff would be seconds.
  const chain = new SshChainConnection([server.hop()], { initialBackoffMs: 5000, maxBackoffMs: 10_000, stableAfterMs: 300 });
  try {
    await chain.connect();
    await eventually(() => server.logins >= 3, 3000, `only ${server.logins} logins: the drops waited for the backoff`);
  } finally {
    await chain.close();
    await server.close();
  }
});

test("a hop the hop before cannot reach in time fails the chain at its ConnectTimeout, not the kernel's", async () => {
  // The first hop takes 3 s to open any channel: the second hop's dial hangs that long.
  const server = await startSsh2Server({ openDelayMs: 3000 });
  const chain = new SshChainConnection([server.hop(), server.hop({ alias: 'second', connectTimeoutMs: 400 })]);
  try {
    // The message names the timer that fired: without it the dial would succeed after 3 s.
    await assert.rejects(chain.connect(), /second.*cannot reach it within 400 ms \(ConnectTimeout\)/);
    // The failed chain leaves no session behind on the first hop.
    await eventually(() => server.connections.size === 0, 3000, "the first hop's session was left open");
  } finally {
    await chain.close();
    await server.close();
  }
});

test('a dead ssh-agent is warned about once per route, not at every reconnect; again after it has worked', { skip: agentUnavailable }, async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'dead-agent-'));
  const socket = path.join(dir, 'agent.sock');
  // What an agent that was killed leaves: the socket file, with no one accepting on it.
  const leaveDeadSocket = () =>
    execFileSync(process.execPath, ['-e', `require('net').createServer().listen(${JSON.stringify(socket)}, () => process.exit(0))`]);
  leaveDeadSocket();
  const lines: Array<{ level: number; msg: string }> = [];
  const sink = new Writable({ write: (chunk: Buffer, _enc, cb) => (lines.push(JSON.parse(chunk.toString('utf8')) as { level: number; msg: string }), cb()) });
  const agentLines = (level: number) => lines.filter((l) => l.level === level && /ssh-agent/.test(l.msg)).length;
  // Each session ends right after its login: the chain logs in again and again (the IdentityFile
  // gets it in), and each login finds the agent dead.
  const server = await startSsh2Server({ endAfterLoginMs: 20 });
  const chain = new SshChainConnection([server.hop({ agentSocket: socket })], {
    log: createLogger('debug', sink),
    initialBackoffMs: 50,
    maxBackoffMs: 100,
    stableAfterMs: 60_000,
  });
  let agent: ChildProcess | undefined;
  try {
    await chain.connect();
    await eventually(() => server.logins >= 4, 5000, `only ${server.logins} logins`);
    assert.equal(agentLines(WARN), 1, 'one warning for the dead agent');
    assert.ok(agentLines(DEBUG) >= 3, 'the later logins say it at debug level');
    // An agent on that socket again: the next login says it works, and a later death is news.
    rmSync(socket);
    agent = spawn('ssh-agent', ['-D', '-a', socket], { stdio: 'ignore' });
    await eventually(() => lines.some((l) => l.level === INFO && l.msg === 'ssh-agent usable again'), 5000, 'the agent working again was not noticed');
    agent.kill();
    await once(agent, 'exit');
    rmSync(socket, { force: true });
    leaveDeadSocket();
    await eventually(() => agentLines(WARN) === 2, 5000, 'the agent dying again was not warned about');
  } finally {
    agent?.kill();
    await chain.close();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a `via` API connection destroyed mid-response: its channel is done at once, and close() does not wait for it', async () => {
  // An API server reached through the hop (which dials out, as sshd does), over the TLS that
  // agentThrough runs on each channel; it answers until nothing moves (a response nobody reads).
  const pki = new SimPki();
  const cert = pki.servingCert();
  let stalled!: () => void;
  const answerStalled = new Promise<void>((resolve) => (stalled = resolve));
  const api = https.createServer({ key: cert.keyPem, cert: cert.certPem }, (_req, res) => void writeUntilStalled(res).then(stalled));
  api.listen(0, '127.0.0.1');
  await once(api, 'listening');
  const apiPort = (api.address() as AddressInfo).port;
  const server = await startSsh2Server({ dialOut: true });
  const chain = new SshChainConnection([server.hop()]);
  try {
    const agent = agentThrough((host, port, signal) => chain.dial(host, port, signal), { ca: pki.caPem });
    const response = await new Promise<IncomingMessage>((resolve, reject) =>
      https.get({ host: '127.0.0.1', port: apiPort, path: '/api', agent }, resolve).on('error', reject),
    );
    assert.equal(chain.status().channels, 1);
    await answerStalled;
    // Cut with its data unread (a watch stopped, a reload dropping the cluster).
    response.destroy();
    await eventually(() => chain.status().channels === 0, 5000, 'the channel under the destroyed TLS socket still counts as open');
    const closed = await bounded(
      chain.close().then(() => 'closed'),
      5000,
      'still waiting',
    );
    assert.equal(closed, 'closed');
    await eventually(() => server.connections.size === 0, 5000, 'the session stayed open on the hop');
  } finally {
    // Bounded: a close() waiting for the channel would hold the test for ever.
    await bounded(chain.close(), 1000, undefined);
    await server.close();
    api.closeAllConnections();
    api.close();
  }
});

test("a destroyed channel emits 'close' once, as a socket does: at once, not again when the hop answers", async () => {
  const server = await startSsh2Server();
  const chain = new SshChainConnection([server.hop()]);
  try {
    await chain.connect();
    const channel = await chain.dial('echo.test', 7, AbortSignal.timeout(5000));
    await eventually(() => server.channels.size === 1, 5000, 'the hop has no channel');
    const events: string[] = [];
    channel.on('error', (err) => events.push(`error ${err.message}`));
    channel.on('close', () => events.push('close'));
    channel.destroy(new Error('client gone'));
    assert.equal(chain.status().channels, 0);
    await new Promise((r) => process.nextTick(r));
    assert.deepEqual(events, ['error client gone', 'close']);
    // The hop answers our CHANNEL_CLOSE; ssh2 then forgets the channel without a second 'close'.
    await eventually(() => server.channels.size === 0, 5000, 'the hop kept the channel');
    await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(events, ['error client gone', 'close']);
  } finally {
    // Bounded: a close() waiting for the destroyed channel would hold the test for ever.
    await bounded(chain.close(), 1000, undefined);
    await server.close();
  }
});

test('a hop gone silent is not waited for at close(): after the deadline its ProxyCommand is ended, not left running', async () => {
  const server = await startSsh2Server();
  // The hop is reached through a ProxyCommand relay that, like `nc` without -N, keeps its
  // connection when its stdin ends; in front of the hop, a relay that can go silent.
  const silent = await startFreezableProxy(server.port);
  const relay = path.join(server.dir, 'relay.cjs');
  const pidFile = path.join(server.dir, 'relay.pid');
  writeFileSync(
    relay,
    `const s = require('net').connect(Number(process.argv[2]), '127.0.0.1');
     require('fs').writeFileSync(process.argv[3], String(process.pid));
     process.stdin.pipe(s, { end: false });
     s.pipe(process.stdout);
     s.on('close', () => process.exit(0));`,
  );
  const silentPort = Number(new URL(silent.url).port);
  const hop = server.hop({ proxyCommand: `${process.execPath} ${relay} ${silentPort} ${pidFile}` });
  const chain = new SshChainConnection([hop], { closeDeadlineMs: 500 });
  try {
    await chain.connect();
    const pid = Number(readFileSync(pidFile, 'utf8'));
    // The hop goes silent: our DISCONNECT never reaches it, and nothing ever closes the relay.
    assert.equal(silent.freeze(), 1);
    await chain.close();
    await eventually(() => !alive(pid), 5000, 'the ProxyCommand of a closed route is still running');
  } finally {
    await chain.close();
    await silent.close();
    await server.close();
  }
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

test('an IdentityFile that cannot sign is warned about once per route, not at every reconnect; again after it has signed', async () => {
  const lines: Array<{ level: number; msg: string; identityFile?: string }> = [];
  const sink = new Writable({ write: (chunk: Buffer, _enc, cb) => (lines.push(JSON.parse(chunk.toString('utf8')) as (typeof lines)[number]), cb()) });
  const keyLines = (level: number) => lines.filter((l) => l.level === level && /IdentityFile/.test(l.msg)).length;
  // Each session ends right after its login: the chain logs in again and again. The first key
  // is damaged (the hop accepts it, it cannot sign), the second gets us in.
  const server = await startSsh2Server({ endAfterLoginMs: 20 });
  const { good, damaged } = rsaKeyAndDamagedCopy();
  const file = path.join(server.dir, 'id_rsa');
  writeFileSync(file, damaged, { mode: 0o600 });
  const hop = server.hop();
  const chain = new SshChainConnection([{ ...hop, identityFiles: [file, ...hop.identityFiles] }], {
    log: createLogger('debug', sink),
    initialBackoffMs: 50,
    maxBackoffMs: 100,
    stableAfterMs: 60_000,
  });
  try {
    await chain.connect();
    await eventually(() => server.logins >= 4, 5000, `only ${server.logins} logins`);
    assert.equal(keyLines(WARN), 1, 'one warning for the key that cannot sign');
    assert.equal(lines.find((l) => l.level === WARN && /IdentityFile/.test(l.msg))?.identityFile, file);
    assert.ok(keyLines(DEBUG) >= 3, 'the later logins say it at debug level');
    // The key repaired: the next login signs with it and says so; damaged again, that is news.
    writeFileSync(file, good);
    await eventually(() => lines.some((l) => l.level === INFO && l.msg === 'IdentityFile signs again'), 5000, 'the key signing again was not noticed');
    writeFileSync(file, damaged);
    await eventually(() => keyLines(WARN) === 2, 5000, 'the key failing again was not warned about');
  } finally {
    await chain.close();
    await server.close();
  }
});

/**
 * An RSA key in OpenSSH's format, and a copy with its prime p zeroed: ssh2 reads the copy (its
 * public half is intact) but cannot sign with it ("RSA lib"), as with a key file damaged on disk.
 */
function rsaKeyAndDamagedCopy(): { good: string; damaged: string } {
  const good = ssh2().utils.generateKeyPairSync('rsa', { bits: 1024 }).private;
  const blob = Buffer.from(good.replace(/-----[^-]+-----/g, '').replace(/\s+/g, ''), 'base64');
  // OpenSSH PROTOCOL.key: magic, then strings and words up to the prime p.
  let at = 'openssh-key-v1\0'.length;
  const skip = () => (at += 4 + blob.readUInt32BE(at));
  for (let i = 0; i < 3; i++) skip(); // cipher, kdf, kdf options
  at += 4; // key count
  skip(); // public key
  at += 4 + 8; // the private part's length, two check words
  for (let i = 0; i < 5; i++) skip(); // key type, n, e, d, iqmp
  blob.fill(0, at + 4, at + 4 + blob.readUInt32BE(at));
  const damaged = `-----BEGIN OPENSSH PRIVATE KEY-----\n${blob.toString('base64').replace(/.{70}/g, '$&\n')}\n-----END OPENSSH PRIVATE KEY-----\n`;
  const parsed = ssh2().utils.parseKey(damaged) as ParsedKey;
  assert.ok(parsed.sign(Buffer.from('x')) instanceof Error, 'the damaged key still signs');
  return { good, damaged };
}
