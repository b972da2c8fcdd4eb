// The ssh route's one kept connection per chain, against real OpenSSH jump hosts in network
// namespaces (test/helpers/ssh-lab.ts): many streams over it, a jump host that restarts, one
// that ends our session, one that hangs.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import { finished } from 'node:stream/promises';
import { HostUnreachableError } from '../../src/core/errors.js';
import { sshLabUnavailable, startSshLab, TARGET, type SshLab } from '../helpers/ssh-lab.js';
import { echoChecked, openThrough, sshRoute } from '../helpers/ssh-route.js';
import { eventually } from '../helpers/cluster.js';
import { writeUntilStalled } from '../helpers/streams.js';
import type { SshRoute } from '../../src/routes/ssh/route.js';

const unavailable = sshLabUnavailable();
if (unavailable) console.log(`# skipping the ssh route tests: ${unavailable}`);
let lab: SshLab;
let route: SshRoute;

before(async () => {
  if (unavailable) return;
  lab = await startSshLab();
  const kh = `${lab.dir}/known_hosts`;
  writeFileSync(kh, `${lab.knownHostsLines.jump1}\n${lab.knownHostsLines.jump2}\n`);
  route = sshRoute(lab.writeConfig('config', { all: [`IdentityFile ${lab.userKey}`, `UserKnownHostsFile ${kh}`, 'ServerAliveInterval 2'] }), 'jump2');
  await route.start();
});
after(async () => {
  await route?.close();
  await lab?.close();
});

test('200 concurrent streams over one chain, every byte checked with sha256', { skip: unavailable }, async () => {
  const streams = await Promise.all(Array.from({ length: 200 }, (_, i) => openThrough(route, i % 2 ? TARGET.name : TARGET.ip, TARGET.echoPort, 30_000)));
  assert.equal(route.status().details?.channels, 200);
  await Promise.all(streams.map((s, i) => echoChecked(s, 16 * 1024 + i * 97)));
  // All of it on one SSH connection (one login per hop).
  assert.equal(route.status().details?.connects, 1);
});

test('a jump host restarted mid-run: its open streams end, new ones succeed after the reconnect', { skip: unavailable }, async () => {
  const open: Duplex = await openThrough(route, TARGET.ip, TARGET.echoPort);
  await echoCheckedKeepOpen(open);
  // The stream fails (an abort, not a clean EOF that would look like a complete response).
  const ended = finished(open).then(
    () => assert.fail('the stream on the dropped chain ended cleanly'),
    (err: Error) => assert.match(err.message, /ssh hop jump\d .*the connection dropped/),
  );
  const connectsBefore = route.status().details?.connects as number;

  await lab.restartJump1(1500);
  await withTimeout(ended, 10_000, 'the stream on the restarted chain did not end');

  // While jump1 was down, or right after, a stream may fail — always with jump1 named, never 0x05.
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      await echoChecked(await openThrough(route, TARGET.name, TARGET.echoPort, 5000), 32 * 1024);
      break;
    } catch (err) {
      assert.ok(
        err instanceof HostUnreachableError || (err as Error).name === 'UpstreamHopError' || (err as Error).name === 'ConnectTimeoutError',
        String(err),
      );
      assert.notEqual((err as { socksReply?: number }).socksReply, 0x05);
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
  assert.equal(route.status().details?.connects, connectsBefore + 1);
  assert.equal(route.status().details?.connection, 'up');
  assert.deepEqual([route.status().state, route.status().condition, route.status().since], ['ready', undefined, undefined]);
});

test('a jump host behind another that ends our session (its sshd killed): the chain drops and reconnects', { skip: unavailable }, async () => {
  const connectsBefore = route.status().details?.connects as number;
  const open = await openThrough(route, TARGET.ip, TARGET.echoPort);
  const ended = finished(open).then(
    () => assert.fail('the stream on the dropped chain ended cleanly'),
    (err: Error) => assert.match(err.message, /ssh hop jump2 .*the connection dropped/),
  );
  try {
    lab.endJump2Sessions();
    await withTimeout(ended, 10_000, 'the stream through the ended session did not end: the chain still counts as up');
    // A stream asked for during the backoff fails with the drop; one after it goes through.
    await eventually(async () => {
      await echoChecked(await openThrough(route, TARGET.name, TARGET.echoPort, 5000), 32 * 1024);
      return true;
    }, 15_000);
    assert.equal(route.status().details?.connects, connectsBefore + 1);
  } finally {
    open.destroy();
  }
});

test('a jump host behind another that hangs mid-upload: the chain drops at its keepalive and reconnects once it answers', { skip: unavailable }, async () => {
  // jump2 is reached through a channel of jump1. When jump2 stops answering, our keepalive gives
  // up and ssh2 destroys that channel; jump1 answers our CHANNEL_CLOSE only once it has written
  // what it holds for jump2 — never, with jump2 hung and an upload filling the way there.
  const kh = `${lab.dir}/known_hosts`;
  const hanging = sshRoute(
    lab.writeConfig('config-hang', {
      all: [`IdentityFile ${lab.userKey}`, `UserKnownHostsFile ${kh}`],
      jump2: ['ServerAliveInterval 1', 'ServerAliveCountMax 2', 'ConnectTimeout 3'],
    }),
    'jump2',
  );
  await hanging.start();
  const upload = await openThrough(hanging, TARGET.ip, TARGET.echoPort);
  try {
    upload.on('error', () => undefined);
    upload.resume();
    lab.hangJump2();
    await writeUntilStalled(upload);
    await eventually(async () => hanging.status().details?.connection !== 'up', 15_000).catch(() => {
      throw new Error('the chain still counts as up with jump2 hung: it never drops, never reconnects');
    });
    lab.resumeJump2();
    await eventually(async () => {
      await echoChecked(await openThrough(hanging, TARGET.ip, TARGET.echoPort, 5000), 1024);
      return true;
    }, 30_000);
    assert.equal(hanging.status().details?.connection, 'up');
  } finally {
    lab.resumeJump2();
    upload.destroy();
    await hanging.close();
  }
});

test('the route is starting until its chain logs in, then ready, and degraded while no hop answers: no stream needed', { skip: unavailable }, async () => {
  const kh = `${lab.dir}/known_hosts`;
  const fresh = sshRoute(lab.writeConfig('config-fresh', { all: [`IdentityFile ${lab.userKey}`, `UserKnownHostsFile ${kh}`] }), 'jump2');
  await fresh.start();
  try {
    // Two logins (jump1, then jump2 through it) cannot be done yet: not "ready" for a chain never tried.
    assert.equal(fresh.status().state, 'starting');
    await eventually(async () => fresh.status().state === 'ready', 15_000);
    const { connection, connects, channels } = fresh.status().details!;
    assert.deepEqual([connection, connects, channels], ['up', 1, 0]);
    // A channel half-closes as TCP does: the relay keeps no tear-down clock for it.
    const signal = AbortSignal.timeout(10_000);
    const opened = await fresh.open(
      { destination: { host: TARGET.ip, port: TARGET.echoPort, type: 'ipv4' }, frontEnd: 'socks5', client: 'test', signal },
      undefined as never,
      signal,
    );
    assert.equal(opened.tcpHalfClose, true);
    opened.stream.destroy();
  } finally {
    await fresh.close();
  }

  const deadConfig = path.join(lab.dir, 'config-dead');
  writeFileSync(deadConfig, ['Host dead', '  HostName 127.0.0.1', '  Port 1', '  User root', `  IdentityFile ${lab.userKey}`, ''].join('\n'));
  const dead = sshRoute(deadConfig, 'dead');
  await dead.start();
  try {
    await eventually(async () => dead.status().state === 'degraded', 10_000);
    assert.match(dead.status().reason ?? '', /dead/);
    assert.ok(dead.status().since, 'failing since the first attempt');
  } finally {
    await dead.close();
  }
});

/** One echo round trip that leaves the stream open. */
async function echoCheckedKeepOpen(stream: Duplex): Promise<void> {
  const payload = Buffer.from('still here\n');
  const back = await new Promise<Buffer>((resolve) => {
    let got = Buffer.alloc(0);
    const onData = (c: Buffer) => {
      got = Buffer.concat([got, c]);
      if (got.length >= payload.length) {
        stream.off('data', onData);
        resolve(got);
      }
    };
    stream.on('data', onData);
    stream.write(payload);
  });
  assert.deepEqual(back, payload);
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([p, new Promise<T>((_, reject) => (timer = setTimeout(() => reject(new Error(what)), ms)))]).finally(() => clearTimeout(timer));
}
