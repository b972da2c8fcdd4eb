// The chain connection's life over real sockets, against ssh2's own SSH server on loopback
// (test/helpers/ssh2-server.ts): the timings a real sshd cannot be made to hit on cue — a stream
// abandoned while its channel is being opened, close() during a login, a hop that ends every
// session right after login.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SshChainConnection } from '../../src/ssh/connection.js';
import { eventually, startSsh2Server } from '../helpers/ssh2-server.js';

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
