// doctor names what holds a port: found through /proc on Linux, shown as the program (and the
// script a runtime runs), never its other arguments.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { isProxyout, portHolder, portHolders, programOf } from '../../src/doctor/port-holder.js';

test('programOf: the program, and the script after a runtime; never the other arguments', () => {
  assert.equal(programOf(['/usr/bin/node', '/home/me/.npm/bin/kubectl-proxyout', 'serve', '--proxy-auth', 'me:secret']), 'node kubectl-proxyout');
  assert.equal(programOf(['/usr/bin/node', '--enable-source-maps', 'dist/bin/kubectl-proxyout']), 'node kubectl-proxyout');
  assert.equal(programOf(['/home/me/.krew/bin/kubectl-proxyout', '--listen-socks', ':1080']), 'kubectl-proxyout');
  assert.equal(programOf(['/usr/bin/redis-server', '*:6379']), 'redis-server');
  assert.equal(programOf([]), '');
});

test('isProxyout: the plugin, its single executable and node running it; not look-alikes', () => {
  for (const program of ['kubectl-proxyout', 'kubectl-proxyout-linux-amd64', 'node kubectl-proxyout'])
    assert.equal(isProxyout({ pid: 1, program }), true, program);
  for (const program of ['node', 'redis-server', 'kubectl', 'node not-kubectl-proxyout.js', 'kubectl-proxyout.sh'])
    assert.equal(isProxyout({ pid: 1, program }), false, program);
});

test('portHolder finds the process listening on a port (this one) on Linux', { skip: process.platform !== 'linux' && 'reads /proc' }, async () => {
  const server = net.createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as net.AddressInfo).port;
  try {
    const holder = portHolder(port);
    assert.equal(holder?.pid, process.pid);
    assert.match(holder!.program, /^node /);
  } finally {
    server.close();
  }
  await once(server, 'close');
  assert.equal(portHolder(port), undefined, 'nothing listens there now');
  assert.equal(portHolder(port, 'darwin'), undefined, 'other platforms: not known');
});

test(
  'portHolders finds every process on the port number, on any address (the one in the way is not always the first)',
  { skip: process.platform !== 'linux' && 'reads /proc' },
  async () => {
    const server = net.createServer().listen(0, '127.0.0.1');
    await once(server, 'listening');
    const port = (server.address() as net.AddressInfo).port;
    const child = spawn(process.execPath, ['-e', `require('net').createServer().listen(${port}, '::1', () => console.log('up'))`], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      await once(child.stdout!, 'data');
      const pids = portHolders(port)
        .map((h) => h.pid)
        .sort();
      assert.deepEqual(pids, [process.pid, child.pid!].sort());
    } finally {
      child.kill();
      server.close();
    }
  },
);
