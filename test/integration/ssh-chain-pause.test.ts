// The chain connection after the process was paused (a laptop asleep): its kept connection may
// be dead without a sign, and the keepalives would take ServerAliveInterval × ServerAliveCountMax
// (45 s by default) to notice. Against ssh2's own SSH server behind a relay that can go silent.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { SshChainConnection } from '../../src/ssh/connection.js';
import { startSsh2Server, type Ssh2TestServer } from '../helpers/ssh2-server.js';
import { startFreezableProxy } from '../helpers/freezable-proxy.js';
import { openThrough, sshRoute } from '../helpers/ssh-route.js';
import { echoes } from '../helpers/streams.js';

/** An ssh config naming the server as Host "hop", reached through `port` (a relay in front of it). */
function configVia(server: Ssh2TestServer, port: number): string {
  const knownHosts = path.join(server.dir, 'known_hosts');
  const line = readFileSync(knownHosts, 'utf8');
  writeFileSync(knownHosts, line + line.replace(`]:${server.port} `, `]:${port} `));
  const file = path.join(server.dir, 'ssh_config');
  const hop = server.hop();
  const lines = [
    'Host hop',
    '  HostName 127.0.0.1',
    `  Port ${port}`,
    `  User ${hop.user}`,
    `  IdentityFile ${hop.identityFiles[0]}`,
    `  UserKnownHostsFile ${knownHosts}`,
  ];
  writeFileSync(file, lines.join('\n') + '\n');
  return file;
}

test('after a pause, a route whose chain went silent connects again within the check; a new stream waits for it', async () => {
  const server = await startSsh2Server();
  const relay = await startFreezableProxy(server.port);
  const route = sshRoute(configVia(server, Number(new URL(relay.url).port)), 'hop');
  try {
    await route.start();
    const old = await openThrough(route, 'example.test', 80, 5000);
    const oldFailed = new Promise<Error>((resolve) => old.once('error', resolve));
    // The laptop slept; the path to the hop is gone, and nothing says so.
    assert.equal(relay.freeze(), 1);
    route.afterPause();
    // Without the check this stream went to the dead connection and timed out.
    const fresh = await openThrough(route, 'example.test', 80, 5000);
    assert.equal(await echoes(fresh), 'ping');
    fresh.destroy();
    assert.equal(route.status().details?.connects, 2);
    assert.match((await oldFailed).message, /no answer within 3000 ms after the process was paused/);
  } finally {
    await route.close();
    await relay.close();
    await server.close();
  }
});

test('after a pause, a chain that answers is kept, and so are its streams', async () => {
  const server = await startSsh2Server();
  const chain = new SshChainConnection([server.hop()]);
  try {
    await chain.connect();
    const old = await chain.dial('example.test', 80, AbortSignal.timeout(5000));
    chain.afterPause(2000);
    const fresh = await chain.dial('example.test', 80, AbortSignal.timeout(5000));
    assert.equal(await echoes(fresh), 'ping');
    assert.equal(await echoes(old), 'ping');
    assert.equal(chain.status().connects, 1);
    fresh.destroy();
    old.destroy();
  } finally {
    await chain.close();
    await server.close();
  }
});
