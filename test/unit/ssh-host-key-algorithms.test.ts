// HostKeyAlgorithms: the list assembled as OpenSSH's kex_assemble_names does, the names checked
// as readconf.c checks them, and the known_hosts ordering applied only where ssh_kex2 applies it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { SshConfigFile, SshConfigError } from '../../src/ssh/config.js';
import { resolveChain } from '../../src/ssh/chain.js';
import { DEFAULT_HOST_KEY_ALGORITHMS, orderByKnownKeyTypes, parseHostKeyAlgorithms } from '../../src/ssh/host-key-algorithms.js';
import { hostKeyAlgorithmsFor } from '../../src/ssh/host-key-check.js';
import { scratchDir } from '../helpers/scratch-dir.js';

const ECDSA = ['ecdsa-sha2-nistp256', 'ecdsa-sha2-nistp384', 'ecdsa-sha2-nistp521'];
const RSA = ['rsa-sha2-512', 'rsa-sha2-256'];

test('the list: outright, "+" appended, "-" removed, "^" in front; patterns expand; no name twice', () => {
  assert.deepEqual(parseHostKeyAlgorithms(undefined), { list: DEFAULT_HOST_KEY_ALGORITHMS, knownHostsOrder: true });
  assert.deepEqual(parseHostKeyAlgorithms('rsa-sha2-256,ecdsa-sha2-nistp256'), { list: ['rsa-sha2-256', 'ecdsa-sha2-nistp256'], knownHostsOrder: false });
  assert.deepEqual(parseHostKeyAlgorithms('+ssh-dss'), { list: [...DEFAULT_HOST_KEY_ALGORITHMS, 'ssh-dss'], knownHostsOrder: true });
  // SHA-1 RSA signatures are out of the default list (OpenSSH 8.8); "+" brings them back, once.
  assert.equal(DEFAULT_HOST_KEY_ALGORITHMS.includes('ssh-rsa'), false);
  assert.deepEqual(parseHostKeyAlgorithms('+ssh-rsa').list, [...DEFAULT_HOST_KEY_ALGORITHMS, 'ssh-rsa']);
  assert.deepEqual(parseHostKeyAlgorithms('+rsa-sha2-256').list, DEFAULT_HOST_KEY_ALGORITHMS, 'already there: not twice');
  assert.deepEqual(parseHostKeyAlgorithms('-ssh-ed25519,ecdsa-*'), { list: RSA, knownHostsOrder: true });
  assert.deepEqual(parseHostKeyAlgorithms('^ecdsa-sha2-nistp384'), {
    list: ['ecdsa-sha2-nistp384', 'ssh-ed25519', 'ecdsa-sha2-nistp256', 'ecdsa-sha2-nistp521', ...RSA],
    knownHostsOrder: false,
  });
  assert.deepEqual(parseHostKeyAlgorithms('ecdsa-*,ssh-ed25519,ecdsa-sha2-nistp256').list, [...ECDSA, 'ssh-ed25519']);
  // A "-" list is not checked (readconf.c): a name nobody knows removes nothing.
  assert.deepEqual(parseHostKeyAlgorithms('-no-such-alg,*-cert-v01@openssh.com').list, DEFAULT_HOST_KEY_ALGORITHMS);
});

test('names that cannot be used are refused, all of them named; so are lists that leave nothing', () => {
  assert.throws(
    () => parseHostKeyAlgorithms('ssh-ed25519-cert-v01@openssh.com,ssh-ed25519,sk-ssh-ed25519@openssh.com'),
    (err: Error) => {
      assert.match(err.message, /: ssh-ed25519-cert-v01@openssh\.com, sk-ssh-ed25519@openssh\.com are not supported \(.*supported: ssh-ed25519, /);
      return true;
    },
  );
  assert.throws(() => parseHostKeyAlgorithms('^foo'), /foo is not supported/);
  assert.throws(
    () => parseHostKeyAlgorithms('+*-cert-v01@openssh.com'),
    /\*-cert-v01@openssh\.com is not supported/,
    'a pattern must match something we support',
  );
  assert.throws(() => parseHostKeyAlgorithms('ssh-ed25519,!ssh-rsa'), /"!" negation is only allowed after "-"/);
  assert.throws(() => parseHostKeyAlgorithms('-*'), /leaves no host key algorithm/);
  assert.throws(() => parseHostKeyAlgorithms('ssh-ed25519 ssh-rsa'), /one comma-separated list/);
});

test('known_hosts order: the known types first unless the first choice is known (order_hostkeyalgs)', () => {
  const list = parseHostKeyAlgorithms(undefined).list;
  assert.deepEqual(orderByKnownKeyTypes(list, new Set(['ssh-rsa'])), [...RSA, 'ssh-ed25519', ...ECDSA]);
  assert.deepEqual(orderByKnownKeyTypes(list, new Set(['ssh-ed25519', 'ssh-rsa'])), list, 'ed25519 known: verbatim');
  assert.deepEqual(orderByKnownKeyTypes(list, new Set()), list);
});

test('from ssh config: per host, refused at start naming host and file, ordered by known_hosts only for the default, "+" and "-"', () => {
  const dir = scratchDir('hka-');
  const knownHosts = path.join(dir, 'known_hosts');
  writeFileSync(knownHosts, 'h ssh-rsa AAAA\n');
  const config = (line: string) =>
    SshConfigFile.fromText(`Host h\n  ${line}\n  UserKnownHostsFile ${knownHosts}\n  GlobalKnownHostsFile none\n`, {
      file: `${dir}/config`,
      home: dir,
      localUser: 'u',
    });
  const offered = (line: string) => hostKeyAlgorithmsFor(resolveChain(config(line), 'h', { authSock: '' })[0]!);
  assert.deepEqual(offered('Port 22'), [...RSA, 'ssh-ed25519', ...ECDSA]);
  assert.deepEqual(offered('HostKeyAlgorithms -ecdsa-*'), [...RSA, 'ssh-ed25519']);
  assert.deepEqual(offered('HostKeyAlgorithms +ssh-dss'), [...RSA, 'ssh-ed25519', ...ECDSA, 'ssh-dss']);
  // Given outright or with "^": offered as written, though the host is known by its RSA key.
  assert.deepEqual(offered('HostKeyAlgorithms ssh-ed25519,rsa-sha2-512'), ['ssh-ed25519', 'rsa-sha2-512']);
  assert.deepEqual(offered('HostKeyAlgorithms ^ecdsa-sha2-nistp256'), [
    'ecdsa-sha2-nistp256',
    'ssh-ed25519',
    'ecdsa-sha2-nistp384',
    'ecdsa-sha2-nistp521',
    ...RSA,
  ]);
  assert.throws(
    () => offered('HostKeyAlgorithms ssh-rsa-cert-v01@openssh.com'),
    (err: unknown) => {
      assert.ok(err instanceof SshConfigError);
      assert.match(
        err.message,
        new RegExp(`^host h \\(${dir}/config\\): HostKeyAlgorithms ssh-rsa-cert-v01@openssh\\.com: ssh-rsa-cert-v01@openssh\\.com is not supported`),
      );
      return true;
    },
  );
});
