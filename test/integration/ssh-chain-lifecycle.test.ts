// The chain connection's life over real sockets, against ssh2's own SSH server on loopback
// (test/helpers/ssh2-server.ts): the timings a real sshd cannot be made to hit on cue — a stream
// abandoned while its channel is being opened, close() during a login, a hop that ends every
// session right after login.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { createLogger } from '../../src/core/log.js';
import { SshChainConnection } from '../../src/ssh/connection.js';
import { eventually, startSsh2Server } from '../helpers/ssh2-server.js';

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

test('a hop the hop before cannot reach in time fails the chain at its ConnectTimeout, not the kernel\'s', async () => {
  // The first hop takes 3 s to open any channel: the second hop's dial hangs that long.
  const server = await startSsh2Server({ openDelayMs: 3000 });
  const chain = new SshChainConnection([server.hop(), server.hop({ alias: 'second', connectTimeoutMs: 400 })]);
  try {
    const started = Date.now();
    await assert.rejects(chain.connect(), /second.*cannot reach it within 400 ms \(ConnectTimeout\)/);
    assert.ok(Date.now() - started < 2500, `${Date.now() - started} ms`);
    // The failed chain leaves no session behind on the first hop.
    await eventually(() => server.connections.size === 0, 3000, 'the first hop\'s session was left open');
  } finally {
    await chain.close();
    await server.close();
  }
});

test('a dead ssh-agent is warned about once per route, not at every reconnect; again after it has worked', { skip: agentUnavailable }, async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'dead-agent-'));
  const socket = path.join(dir, 'agent.sock');
  // What an agent that was killed leaves: the socket file, with no one accepting on it.
  const leaveDeadSocket = () => execFileSync(process.execPath, ['-e', `require('net').createServer().listen(${JSON.stringify(socket)}, () => process.exit(0))`]);
  leaveDeadSocket();
  const lines: Array<{ level: number; msg: string }> = [];
  const sink = new Writable({ write: (chunk: Buffer, _enc, cb) => (lines.push(JSON.parse(chunk.toString('utf8')) as { level: number; msg: string }), cb()) });
  const agentLines = (level: number) => lines.filter((l) => l.level === level && /ssh-agent/.test(l.msg)).length;
  // Each session ends right after its login: the chain logs in again and again (the IdentityFile
  // gets it in), and each login finds the agent dead.
  const server = await startSsh2Server({ endAfterLoginMs: 20 });
  const chain = new SshChainConnection([server.hop({ agentSocket: socket })], { log: createLogger('debug', sink), initialBackoffMs: 50, maxBackoffMs: 100, stableAfterMs: 60_000 });
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
