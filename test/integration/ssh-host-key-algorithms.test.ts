// HostKeyAlgorithms against real OpenSSH servers (test/helpers/ssh-lab.ts): jump1 has ed25519,
// ECDSA and RSA host keys, jump2 an ed25519 one only. Which key a hop was asked for shows in what
// accept-new appends to known_hosts, or in which key a strict check refuses.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { StartupError, UpstreamHopError } from '../../src/core/errors.js';
import { sshLabUnavailable, startSshLab, TARGET, type SshLab } from '../helpers/ssh-lab.js';
import { echoChecked, openThrough, sshRoute } from '../helpers/ssh-route.js';

const unavailable = sshLabUnavailable();
if (unavailable) console.log(`# skipping the ssh HostKeyAlgorithms tests: ${unavailable}`);
let lab: SshLab;

before(async () => {
  if (unavailable) return;
  lab = await startSshLab();
});
after(async () => {
  await lab?.close();
});

const knownHosts = (name: string, lines: string[]) => {
  const file = `${lab.dir}/${name}`;
  writeFileSync(file, lines.map((l) => `${l}\n`).join(''));
  return file;
};

/** Opens an echo stream through jump1 → jump2 with these lines for jump1 and this known_hosts file. */
async function throughChain(name: string, jump1: string[], kh: string, strict = 'yes'): Promise<void> {
  const config = lab.writeConfig(`config-${name}`, {
    jump1,
    all: [`IdentityFile ${lab.userKey}`, `UserKnownHostsFile ${kh}`, `StrictHostKeyChecking ${strict}`],
  });
  const route = sshRoute(config, 'jump2');
  await route.start();
  try {
    await echoChecked(await openThrough(route, TARGET.ip, TARGET.echoPort), 4096);
  } finally {
    await route.close();
  }
}

test('the list is honoured: outright, with "^" and with "-", jump1 is asked for the key it names', { skip: unavailable }, async () => {
  // Left to itself the route asks for ed25519 (the first default): accept-new appends that one.
  for (const [value, type] of [
    ['rsa-sha2-256,ecdsa-sha2-nistp256', 'ssh-rsa'],
    ['^ecdsa-sha2-nistp256', 'ecdsa-sha2-nistp256'],
    ['-ssh-ed25519,ecdsa-*', 'ssh-rsa'],
    ['+ssh-dss', 'ssh-ed25519'],
  ] as const) {
    const kh = knownHosts(`kh-list-${type}`, [lab.knownHostsLines.jump2]);
    await throughChain(`list-${type}`, [`HostKeyAlgorithms ${value}`], kh, 'accept-new');
    const added = readFileSync(kh, 'utf8').split('\n').filter(Boolean)[1];
    assert.equal(added?.split(' ')[1], type, `HostKeyAlgorithms ${value}: ${added}`);
  }
});

test('known_hosts order applies to "+" and "-" lists, not to one given outright (as ssh_kex2)', { skip: unavailable }, async () => {
  // jump1 is known by its ECDSA key only.
  const kh = knownHosts('kh-order', [lab.knownHostsLines.jump1Ecdsa, lab.knownHostsLines.jump2]);
  await throughChain('order-plus', ['HostKeyAlgorithms +ssh-dss'], kh);
  await throughChain('order-minus', ['HostKeyAlgorithms -rsa-sha2-*'], kh);
  // Outright, ed25519 first: that is the key jump1 shows, and it is not known.
  await assert.rejects(
    throughChain('order-outright', ['HostKeyAlgorithms ssh-ed25519,ecdsa-sha2-nistp256'], kh),
    /ssh hop jump1 .*unknown host key ssh-ed25519 /,
  );
  assert.deepEqual(readFileSync(kh, 'utf8').split('\n').filter(Boolean), [lab.knownHostsLines.jump1Ecdsa, lab.knownHostsLines.jump2]);
});

test('a host with none of the listed key types fails naming the hop; names we cannot use are refused at start', { skip: unavailable }, async () => {
  // jump2 has only an ed25519 host key.
  const kh = knownHosts('kh-none', [lab.knownHostsLines.jump1, lab.knownHostsLines.jump2]);
  const config = lab.writeConfig('config-none', {
    jump2: ['HostKeyAlgorithms rsa-sha2-512,ecdsa-sha2-nistp256'],
    all: [`IdentityFile ${lab.userKey}`, `UserKnownHostsFile ${kh}`],
  });
  const route = sshRoute(config, 'jump2');
  await route.start();
  try {
    const opening = openThrough(route, TARGET.ip, TARGET.echoPort);
    // Should it open, the stream is destroyed (and route.close() no longer waits for it).
    opening.then(
      (stream) => stream.destroy(),
      () => undefined,
    );
    await assert.rejects(opening, (err: unknown) => {
      assert.ok(err instanceof UpstreamHopError, String(err));
      assert.equal(
        err.message,
        'ssh hop jump2 (root@10.77.12.2:2222): no matching host key type found: it has no host key for any of rsa-sha2-512, ecdsa-sha2-nistp256 (HostKeyAlgorithms)',
      );
      return true;
    });
  } finally {
    await route.close();
  }
  const certs = sshRoute(
    lab.writeConfig('config-certs', {
      jump1: ['HostKeyAlgorithms ssh-ed25519-cert-v01@openssh.com,ssh-ed25519'],
      all: [`IdentityFile ${lab.userKey}`, `UserKnownHostsFile ${kh}`],
    }),
    'jump2',
  );
  await assert.rejects(certs.start(), (err: unknown) => {
    assert.ok(err instanceof StartupError, String(err));
    assert.match(err.message, /host jump1 \(.*config-certs\): HostKeyAlgorithms .*: ssh-ed25519-cert-v01@openssh\.com is not supported/);
    return true;
  });
});

test(
  'a host that signs only with SHA-1 RSA (ssh-rsa) is refused by default, as OpenSSH ≥ 8.8 refuses it; "+ssh-rsa" lets it in',
  { skip: unavailable },
  async () => {
    // jump1's own sshd as the first hop's ProxyCommand, told to offer ssh-rsa signatures only.
    const command = `${lab.jump1Command} -o HostKeyAlgorithms=ssh-rsa`;
    const kh = knownHosts('kh-sha1', [lab.knownHostsLines.jump1Rsa.replace(/^\S+/, 'jump1-sha1'), lab.knownHostsLines.jump2]);
    const jump1 = [`ProxyCommand ${command}`, 'HostKeyAlias jump1-sha1'];
    await assert.rejects(throughChain('sha1-default', jump1, kh), (err: unknown) => {
      assert.ok(err instanceof UpstreamHopError, String(err));
      assert.match(err.message, /ssh hop jump1 .*no matching host key type found/);
      return true;
    });
    await throughChain('sha1-plus', [...jump1, 'HostKeyAlgorithms +ssh-rsa'], kh);
  },
);
