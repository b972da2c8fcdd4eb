// The ssh route against real OpenSSH (sshd, ssh-agent, ssh-keygen) on two chained jump hosts in
// network namespaces (test/helpers/ssh-lab.ts): how it logs in and which host keys it accepts.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { networkInterfaces } from 'node:os';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { StartupError, UpstreamHopError } from '../../src/core/errors.js';
import { sshLabUnavailable, startSshLab, TARGET, type SshLab } from '../helpers/ssh-lab.js';
import { echoChecked, openThrough, sshRoute } from '../helpers/ssh-route.js';

const unavailable = sshLabUnavailable();
if (unavailable) console.log(`# skipping the ssh route tests: ${unavailable}`);
let lab: SshLab;
let agentSocket: string;

before(async () => {
  if (unavailable) return;
  lab = await startSshLab();
  agentSocket = await lab.startAgent();
});
after(async () => {
  await lab?.close();
});

const knownHosts = (name: string, lines: string[]) => {
  const file = `${lab.dir}/${name}`;
  writeFileSync(file, lines.map((l) => `${l}\n`).join(''));
  return file;
};

test('the target is dialled by the last hop: it sees jump2 (10.77.23.2), an address this host does not have', { skip: unavailable }, async () => {
  const hostAddresses = Object.values(networkInterfaces()).flatMap((list) => (list ?? []).map((i) => i.address));
  assert.ok(!hostAddresses.some((a) => a.startsWith('10.77.')), `this host has no 10.77.x address: ${hostAddresses.join(', ')}`);
  const kh = knownHosts('kh-whoami', [lab.knownHostsLines.jump1, lab.knownHostsLines.jump2]);
  const route = sshRoute(lab.writeConfig('config-whoami', { all: [`IdentityFile ${lab.userKey}`, `UserKnownHostsFile ${kh}`] }), 'jump2');
  await route.start();
  try {
    const stream = await openThrough(route, TARGET.name, TARGET.whoamiPort);
    const chunks: Buffer[] = [];
    for await (const chunk of stream) chunks.push(chunk as Buffer);
    // Node 20's async iterator destroyed the stream at its end, Node 24's leaves the channel
    // half-open (our side never ended it); route.close() waits for every channel to close.
    stream.destroy();
    assert.equal(Buffer.concat(chunks).toString().trim(), '10.77.23.2');
  } finally {
    await route.close();
  }
});

test('agent auth: the key on disk is encrypted, the agent holds it; the name is resolved by the far end', { skip: unavailable }, async () => {
  const sock = agentSocket;
  const kh = knownHosts('kh-agent', [lab.knownHostsLines.jump1, lab.knownHostsLines.jump2]);
  const config = lab.writeConfig('config-agent', { all: [`IdentityFile ${lab.encryptedKey}`, `UserKnownHostsFile ${kh}`] });
  const route = sshRoute(config, 'jump2', { authSock: sock });
  await route.start();
  try {
    assert.deepEqual(
      route.hops?.map((h) => h.alias),
      ['jump1', 'jump2'],
    );
    await echoChecked(await openThrough(route, TARGET.name, TARGET.echoPort), 256 * 1024);
    assert.equal(route.status().details?.connects, 1);
  } finally {
    await route.close();
  }
  // Without the agent the same config cannot log in, and says why at start, before any connection.
  const noAgent = sshRoute(config, 'jump2', { authSock: '' });
  await assert.rejects(noAgent.start(), (err: unknown) => {
    assert.ok(err instanceof StartupError);
    assert.match(err.message, /agent_key is encrypted and no ssh-agent \(SSH_AUTH_SOCK is not set\).*never asks for a passphrase/);
    return true;
  });
});

test('key file auth, with the failures mapped: refused port 0x05, unknown name 0x04', { skip: unavailable }, async () => {
  const kh = knownHosts('kh-file', [lab.knownHostsLines.jump1, lab.knownHostsLines.jump2]);
  const route = sshRoute(lab.writeConfig('config-file', { all: [`IdentityFile ${lab.userKey}`, `UserKnownHostsFile ${kh}`] }), 'jump2');
  await route.start();
  try {
    await echoChecked(await openThrough(route, TARGET.ip, TARGET.echoPort), 64 * 1024);
    await assert.rejects(openThrough(route, TARGET.name, TARGET.closedPort), (err: { socksReply?: number; message: string }) => {
      assert.equal(err.socksReply, 0x05, err.message);
      return true;
    });
    await assert.rejects(openThrough(route, 'no-such-host.invalid', 80), (err: { socksReply?: number; message: string }) => {
      assert.equal(err.socksReply, 0x04, err.message);
      assert.match(err.message, /jump2 cannot resolve no-such-host\.invalid/);
      return true;
    });
  } finally {
    await route.close();
  }
});

test('an unknown host key is refused with its fingerprint; so is a changed one', { skip: unavailable }, async () => {
  // jump2 missing: jump1 logs in, jump2 is refused.
  const kh = knownHosts('kh-unknown', [lab.knownHostsLines.jump1]);
  const unknown = sshRoute(lab.writeConfig('config-unknown', { all: [`IdentityFile ${lab.userKey}`, `UserKnownHostsFile ${kh}`] }), 'jump2');
  await unknown.start();
  await assert.rejects(openThrough(unknown, TARGET.ip, TARGET.echoPort), (err: unknown) => {
    assert.ok(err instanceof UpstreamHopError, String(err));
    assert.match(err.message, /ssh hop jump2 \(root@10\.77\.12\.2:2222\): unknown host key ssh-ed25519 /);
    assert.ok(err.message.includes(lab.fingerprints.jump2), `${err.message} should name ${lab.fingerprints.jump2}`);
    assert.equal(err.socksReply, 0x01);
    return true;
  });
  await unknown.close();
  // jump1's entry holds jump2's key: the key for that name changed.
  const changedKh = knownHosts('kh-changed', [
    lab.knownHostsLines.jump1.replace(/ ssh-ed25519 .*/, ` ${lab.knownHostsLines.jump2.split(' ').slice(1).join(' ')}`),
    lab.knownHostsLines.jump2,
  ]);
  const changed = sshRoute(
    lab.writeConfig('config-changed', { all: [`IdentityFile ${lab.userKey}`, `UserKnownHostsFile ${changedKh}`, 'StrictHostKeyChecking accept-new'] }),
    'jump2',
  );
  await changed.start();
  await assert.rejects(openThrough(changed, TARGET.ip, TARGET.echoPort), (err: unknown) => {
    assert.ok(err instanceof UpstreamHopError, String(err));
    assert.match(err.message, /ssh hop jump1 .*HOST KEY CHANGED/);
    assert.ok(err.message.includes(lab.fingerprints.jump1), err.message);
    return true;
  });
  await changed.close();
  // Even accept-new did not replace the old key.
  assert.equal(readFileSync(changedKh, 'utf8').split('\n').filter(Boolean).length, 2);
});

test('accept-new lets new hosts in and appends their keys (hashed when HashKnownHosts is on)', { skip: unavailable }, async () => {
  const kh = knownHosts('kh-new', []);
  const config = lab.writeConfig('config-new', {
    all: [`IdentityFile ${lab.userKey}`, `UserKnownHostsFile ${kh}`, 'StrictHostKeyChecking accept-new'],
    jump2: ['HashKnownHosts yes'],
  });
  const route = sshRoute(config, 'jump2');
  await route.start();
  try {
    await echoChecked(await openThrough(route, TARGET.ip, TARGET.echoPort), 16 * 1024);
  } finally {
    await route.close();
  }
  const lines = readFileSync(kh, 'utf8').split('\n').filter(Boolean);
  assert.equal(lines.length, 2);
  assert.equal(lines[0], lab.knownHostsLines.jump1);
  assert.match(lines[1]!, /^\|1\|\S+ ssh-ed25519 /);
  assert.equal(lines[1]!.split(' ').slice(1).join(' '), lab.knownHostsLines.jump2.split(' ').slice(1).join(' '));
  // The appended keys are now known to a strict config too.
  const strict = sshRoute(lab.writeConfig('config-strict', { all: [`IdentityFile ${lab.userKey}`, `UserKnownHostsFile ${kh}`] }), 'jump2');
  await strict.start();
  try {
    await echoChecked(await openThrough(strict, TARGET.ip, TARGET.echoPort), 1024);
  } finally {
    await strict.close();
  }
});

test('a ProxyCommand other than ssh -W runs as a child process carrying the first hop', { skip: unavailable }, async () => {
  // The first hop's sshd itself, in inetd mode, is the command (as OpenSSH's regress tests do).
  const kh = knownHosts('kh-command', [lab.knownHostsLines.jump1.replace(/^\S+/, 'jump1-by-command'), lab.knownHostsLines.jump2]);
  const config = lab.writeConfig('config-command', {
    jump1: [`ProxyCommand ${lab.jump1Command}`, 'HostKeyAlias jump1-by-command'],
    all: [`IdentityFile ${lab.userKey}`, `UserKnownHostsFile ${kh}`],
  });
  const route = sshRoute(config, 'jump2');
  await route.start();
  try {
    assert.equal(route.hops?.[0]?.proxyCommand, lab.jump1Command);
    await echoChecked(await openThrough(route, TARGET.name, TARGET.echoPort), 64 * 1024);
  } finally {
    await route.close();
  }
});

test('a key the server does not accept: the stream fails naming the hop (0x01), not the destination', { skip: unavailable }, async () => {
  const stranger = `${lab.dir}/stranger_key`;
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', stranger]);
  const kh = knownHosts('kh-stranger', [lab.knownHostsLines.jump1, lab.knownHostsLines.jump2]);
  const route = sshRoute(lab.writeConfig('config-stranger', { all: [`IdentityFile ${stranger}`, `UserKnownHostsFile ${kh}`] }), 'jump2');
  await route.start();
  try {
    await assert.rejects(openThrough(route, TARGET.ip, TARGET.echoPort), (err: unknown) => {
      assert.ok(err instanceof UpstreamHopError, String(err));
      assert.match(err.message, /ssh hop jump1 \(root@127\.0\.0\.1:\d+\) refused our keys/);
      return true;
    });
    assert.equal(route.status().details?.connection, 'down');
    // While the chain is down a new stream fails at once: the route says so, with why and since when.
    const status = route.status();
    assert.deepEqual([status.state, status.condition], ['degraded', 'down']);
    assert.match(status.reason ?? '', /ssh hop jump1 \(root@127\.0\.0\.1:\d+\) refused our keys/);
    assert.ok(Date.now() - Date.parse(status.since!) < 60_000, `since ${status.since}`);
  } finally {
    await route.close();
  }
});

test("IdentitiesOnly: of the agent's keys only the IdentityFiles' are offered", { skip: unavailable }, async () => {
  const kh = knownHosts('kh-only', [lab.knownHostsLines.jump1, lab.knownHostsLines.jump2]);
  const stranger = `${lab.dir}/only_stranger_key`;
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', 'x', '-f', stranger]);
  // The agent holds an authorized key, but IdentitiesOnly names another one: no login.
  const other = sshRoute(
    lab.writeConfig('config-only-other', { all: ['IdentitiesOnly yes', `IdentityFile ${stranger}`, `UserKnownHostsFile ${kh}`] }),
    'jump2',
    { authSock: agentSocket },
  );
  await other.start();
  await assert.rejects(openThrough(other, TARGET.ip, TARGET.echoPort), /refused our keys/);
  await other.close();
  // Naming the agent's key (its .pub is next to it) lets the agent use it.
  const named = sshRoute(
    lab.writeConfig('config-only-named', { all: ['IdentitiesOnly yes', `IdentityFile ${lab.encryptedKey}`, `UserKnownHostsFile ${kh}`] }),
    'jump2',
    { authSock: agentSocket },
  );
  await named.start();
  try {
    await echoChecked(await openThrough(named, TARGET.ip, TARGET.echoPort), 4096);
  } finally {
    await named.close();
  }
});

test(
  'IdentitiesOnly with an encrypted IdentityFile and no .pub beside it: its public half is read from the file, as ssh reads it',
  { skip: unavailable },
  async () => {
    const kh = knownHosts('kh-only-nopub', [lab.knownHostsLines.jump1, lab.knownHostsLines.jump2]);
    // The agent's key alone in a directory: OpenSSH's format keeps the public key unencrypted.
    mkdirSync(`${lab.dir}/nopub`);
    copyFileSync(lab.encryptedKey, `${lab.dir}/nopub/agent_key`);
    const route = sshRoute(
      lab.writeConfig('config-only-nopub', { all: ['IdentitiesOnly yes', `IdentityFile ${lab.dir}/nopub/agent_key`, `UserKnownHostsFile ${kh}`] }),
      'jump2',
      { authSock: agentSocket },
    );
    await route.start();
    try {
      await echoChecked(await openThrough(route, TARGET.ip, TARGET.echoPort), 4096);
    } finally {
      await route.close();
    }
  },
);

test('a dead ssh-agent (its socket left behind) is passed over as ssh passes it over: the IdentityFile logs in', { skip: unavailable }, async () => {
  // What an agent that was killed leaves: the socket file, with no one accepting on it.
  const stale = `${lab.dir}/dead-agent.sock`;
  execFileSync(process.execPath, ['-e', `require('net').createServer().listen(${JSON.stringify(stale)}, () => process.exit(0))`]);
  const kh = knownHosts('kh-dead-agent', [lab.knownHostsLines.jump1, lab.knownHostsLines.jump2]);
  const route = sshRoute(lab.writeConfig('config-dead-agent', { all: [`IdentityFile ${lab.userKey}`, `UserKnownHostsFile ${kh}`] }), 'jump2', {
    authSock: stale,
  });
  await route.start();
  try {
    await echoChecked(await openThrough(route, TARGET.ip, TARGET.echoPort), 4096);
    assert.equal(route.status().details?.connects, 1);
  } finally {
    await route.close();
  }
  // With nothing else to log in with, the refusal says what became of the agent.
  const agentOnly = sshRoute(lab.writeConfig('config-dead-agent-only', { all: [`IdentityFile ${lab.dir}/no-such-key`, `UserKnownHostsFile ${kh}`] }), 'jump2', {
    authSock: stale,
  });
  await agentOnly.start();
  try {
    await assert.rejects(openThrough(agentOnly, TARGET.ip, TARGET.echoPort), (err: unknown) => {
      assert.ok(err instanceof UpstreamHopError, String(err));
      assert.match(
        err.message,
        /ssh hop jump1 .*refused our keys \(publickey authentication failed; the ssh-agent at \S+dead-agent\.sock could not be used: Failed to connect to agent\)/,
      );
      return true;
    });
  } finally {
    await agentOnly.close();
  }
});

test('a host known by its RSA or ECDSA key only is asked for that key, though it also has ed25519 (as ssh orders them)', { skip: unavailable }, async () => {
  // jump1 offers ed25519, ECDSA and RSA host keys; ssh2 alone prefers ed25519 and would find it
  // unknown. OpenSSH puts the algorithms of the key types known for the host first
  // (sshconnect2.c order_hostkeyalgs).
  for (const [type, known] of [
    ['rsa', lab.knownHostsLines.jump1Rsa],
    ['ecdsa', lab.knownHostsLines.jump1Ecdsa],
  ] as const) {
    const kh = knownHosts(`kh-only-${type}`, [known, lab.knownHostsLines.jump2]);
    // accept-new: an ed25519 key taken for new would have been appended beside the known one.
    const route = sshRoute(
      lab.writeConfig(`config-only-${type}`, { all: [`IdentityFile ${lab.userKey}`, `UserKnownHostsFile ${kh}`, 'StrictHostKeyChecking accept-new'] }),
      'jump2',
    );
    await route.start();
    try {
      await echoChecked(await openThrough(route, TARGET.ip, TARGET.echoPort), 4096);
    } finally {
      await route.close();
    }
    assert.deepEqual(readFileSync(kh, 'utf8').split('\n').filter(Boolean), [known, lab.knownHostsLines.jump2], `${type}: known_hosts unchanged`);
    const strict = sshRoute(lab.writeConfig(`config-only-${type}-strict`, { all: [`IdentityFile ${lab.userKey}`, `UserKnownHostsFile ${kh}`] }), 'jump2');
    await strict.start();
    try {
      await echoChecked(await openThrough(strict, TARGET.ip, TARGET.echoPort), 4096);
    } finally {
      await strict.close();
    }
  }
});

/**
 * An ssh-agent of its own holding `keys` (each made unencrypted first; `existing` are added as they
 * are, after them); logs in to jump2 with `directives` and echoes through the route; the agent is
 * killed after.
 */
async function echoWithAgent(name: string, keys: { made: string[]; existing?: string[] }, directives: string[]): Promise<void> {
  const kh = knownHosts(`kh-${name}`, [lab.knownHostsLines.jump1, lab.knownHostsLines.jump2]);
  const sock = `${lab.dir}/${name}-agent.sock`;
  const pid = Number(/SSH_AGENT_PID=(\d+)/.exec(execFileSync('ssh-agent', ['-a', sock], { encoding: 'utf8' }))?.[1]);
  try {
    for (const key of keys.made) execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', key]);
    for (const key of [...keys.made, ...(keys.existing ?? [])]) {
      execFileSync('ssh-add', ['-q', key], { env: { ...process.env, SSH_AUTH_SOCK: sock }, stdio: 'ignore' });
    }
    const route = sshRoute(lab.writeConfig(`config-${name}`, { all: [...directives, `UserKnownHostsFile ${kh}`] }), 'jump2', { authSock: sock });
    await route.start();
    try {
      await echoChecked(await openThrough(route, TARGET.ip, TARGET.echoPort), 4096);
    } finally {
      await route.close();
    }
  } finally {
    if (pid > 0) process.kill(pid);
  }
}

test("the agent offers the IdentityFile's key first: six other keys ahead of it in the agent do not use up MaxAuthTries", { skip: unavailable }, async () => {
  // sshd's default MaxAuthTries is 6: six keys it does not know, added first, then the user key.
  const unknown = Array.from({ length: 6 }, (_, i) => `${lab.dir}/many_${i}`);
  await echoWithAgent('many', { made: unknown, existing: [lab.userKey] }, [`IdentityFile ${lab.userKey}`]);
});

test('a key both the agent and an IdentityFile hold is offered once: MaxAuthTries is not spent on it twice', { skip: unavailable }, async () => {
  // Five keys sshd does not know in the agent, the first also an (unencrypted) IdentityFile; the
  // user key only on disk, named second. Offered once each, the user key is sshd's sixth try
  // (MaxAuthTries 6 lets it in); the first key offered again would be the sixth failure.
  const unknown = Array.from({ length: 5 }, (_, i) => `${lab.dir}/twice_${i}`);
  await echoWithAgent('twice', { made: unknown }, [`IdentityFile ${unknown[0]}`, `IdentityFile ${lab.userKey}`]);
});
