import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac, randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { appendHostKey, checkHostKey, fingerprint, knownHostsName } from '../../src/ssh/known-hosts.js';
import { channelOpenError } from '../../src/ssh/failures.js';
import { hostKeyAlgorithmsFor, verifyHostKey } from '../../src/ssh/host-key-check.js';
import { DEFAULT_HOST_KEY_ALGORITHMS } from '../../src/ssh/host-key-algorithms.js';
import { resolveChain, type SshHop } from '../../src/ssh/chain.js';
import { SshConfigFile } from '../../src/ssh/config.js';
import { SocksReply } from '../../src/core/errors.js';
import { scratchDir } from '../helpers/scratch-dir.js';

/** A key blob as SSH writes it: string "ssh-ed25519", string 32 bytes. */
function ed25519Blob(): Buffer {
  const type = Buffer.from('ssh-ed25519');
  const key = randomBytes(32);
  const out = Buffer.alloc(8 + type.length + key.length);
  out.writeUInt32BE(type.length, 0);
  type.copy(out, 4);
  out.writeUInt32BE(key.length, 4 + type.length);
  key.copy(out, 8 + type.length);
  return out;
}

const dir = scratchDir('known-');
const file = (name: string, text: string) => {
  const f = path.join(dir, name);
  writeFileSync(f, text);
  return f;
};

test('plain, [host]:port, pattern and hashed entries are found; other ports are not the same host', () => {
  const key = ed25519Blob();
  const line = `ssh-ed25519 ${key.toString('base64')}`;
  const salt = randomBytes(20);
  const hashed = `|1|${salt.toString('base64')}|${createHmac('sha1', salt).update('[jump.example]:2222').digest('base64')}`;
  const f = file('k1', `# comment\nother.example ${line}\n*.corp,!bad.corp ${line}\n${hashed} ${line}\n[10.0.0.1]:2200 ${line}\n`);
  assert.equal(checkHostKey([f], 'x.corp', key).status, 'known');
  assert.equal(checkHostKey([f], 'bad.corp', key).status, 'unknown');
  assert.equal(checkHostKey([f], knownHostsName('jump.example', 2222), key).status, 'known');
  assert.equal(checkHostKey([f], knownHostsName('jump.example', 22), key).status, 'unknown');
  assert.equal(checkHostKey([f], knownHostsName('10.0.0.1', 2200), key).status, 'known');
  assert.equal(checkHostKey([f], knownHostsName('10.0.0.1', 22), key).status, 'unknown');
});

test('another key of the same type is a change; a @revoked key is refused anywhere; missing files are skipped', () => {
  const key = ed25519Blob();
  const old = ed25519Blob();
  const f = file('k2', `jump ssh-ed25519 ${old.toString('base64')}\n@revoked * ssh-ed25519 ${key.toString('base64')}\n`);
  assert.deepEqual(checkHostKey([path.join(dir, 'missing'), f], 'jump', ed25519Blob()), { status: 'changed', file: f, line: 1 });
  assert.deepEqual(checkHostKey([f], 'elsewhere', key), { status: 'revoked', file: f, line: 2 });
  assert.equal(checkHostKey([file('k3', `jump ssh-rsa AAAA\n`)], 'jump', key).status, 'unknown');
  // Revoked after the line that lists it, in the same file or in a later one (the user's file
  // comes before /etc/ssh/ssh_known_hosts): still refused, as OpenSSH refuses it.
  const listed = `jump ssh-ed25519 ${key.toString('base64')}\n`;
  const revoke = `@revoked jump ssh-ed25519 ${key.toString('base64')}\n`;
  assert.deepEqual(checkHostKey([file('k5', listed + revoke)], 'jump', key), { status: 'revoked', file: path.join(dir, 'k5'), line: 2 });
  const global = file('k6', revoke);
  assert.deepEqual(checkHostKey([file('k7', listed), global], 'jump', key), { status: 'revoked', file: global, line: 1 });
});

test('names are looked up in lower case, as ssh does: plain and hashed entries', () => {
  const key = ed25519Blob();
  const salt = randomBytes(20);
  const hashed = `|1|${salt.toString('base64')}|${createHmac('sha1', salt).update('[bastion.example.com]:2222').digest('base64')}`;
  const f = file('k8', `${hashed} ssh-ed25519 ${key.toString('base64')}\nlocalhost ssh-ed25519 ${key.toString('base64')}\n`);
  assert.equal(knownHostsName('Bastion.Example.com', 2222), '[bastion.example.com]:2222');
  assert.equal(checkHostKey([f], knownHostsName('Bastion.Example.com', 2222), key).status, 'known');
  assert.equal(checkHostKey([f], knownHostsName('LocalHost', 22), key).status, 'known');
});

test('appended keys (plain and hashed) are found again; the fingerprint is ssh-keygen -l style', () => {
  const key = ed25519Blob();
  const f = file('k4', 'no-newline-at-end ssh-ed25519 AAAA');
  appendHostKey(f, '[h]:2222', key, false);
  appendHostKey(f, 'hashed', key, true);
  assert.equal(checkHostKey([f], '[h]:2222', key).status, 'known');
  assert.equal(checkHostKey([f], 'hashed', key).status, 'known');
  const lines = readFileSync(f, 'utf8').split('\n');
  assert.equal(lines[1], `[h]:2222 ssh-ed25519 ${key.toString('base64')}`);
  assert.match(lines[2]!, /^\|1\|[A-Za-z0-9+/=]+\|[A-Za-z0-9+/=]+ ssh-ed25519 /);
  assert.match(fingerprint(key), /^SHA256:[A-Za-z0-9+/]{43}$/);
});

test('channel open failures map to SOCKS replies by RFC 4254 reason and OpenSSH text', () => {
  const hop = { alias: 'jump2' } as SshHop;
  const fail = (reason: number, description: string) => Object.assign(new Error(`(SSH) Channel open failure: ${description}`), { reason });
  assert.equal(channelOpenError(fail(1, 'administratively prohibited'), 'db', 5432, hop).socksReply, SocksReply.notAllowed);
  assert.equal(channelOpenError(fail(2, 'Connection refused'), 'db', 5432, hop).socksReply, SocksReply.connectionRefused);
  const unknown = channelOpenError(fail(2, 'Name or service not known'), 'nope.internal', 80, hop);
  assert.equal(unknown.socksReply, SocksReply.hostUnreachable);
  assert.match(unknown.message, /jump2 cannot resolve nope.internal/);
  assert.equal(channelOpenError(fail(2, 'No route to host'), 'db', 1, hop).socksReply, SocksReply.hostUnreachable);
  assert.equal(channelOpenError(fail(4, 'resource shortage'), 'db', 1, hop).socksReply, SocksReply.generalFailure);
  // An IPv6 destination is bracketed before its port.
  assert.match(channelOpenError(fail(2, 'Connection refused'), 'fd00::7', 5432, hop).message, /^\[fd00::7\]:5432 refused the connection/);
});

test('host key algorithms asked for first: those of the key types listed for the host (OpenSSH order_hostkeyalgs)', () => {
  const blob = ed25519Blob().toString('base64');
  const hashed = (name: string) => {
    const salt = randomBytes(20);
    return `|1|${salt.toString('base64')}|${createHmac('sha1', salt).update(name).digest('base64')}`;
  };
  const user = file(
    'kh-order-user',
    `[bastion]:2222 ssh-rsa AAAA\n${hashed('[bastion]:2222')} ecdsa-sha2-nistp384 AAAA\nother ssh-ed25519 ${blob}\n@revoked * ssh-ed25519 ${blob}\n`,
  );
  const global = file('kh-order-global', `alias-name ssh-ed25519 ${blob}\n`);
  const hop = { hostName: 'Bastion', port: 2222, knownHostsFiles: [user], globalKnownHostsFiles: [global] } as SshHop;
  // In the default order, RSA's signature algorithms (SHA-2 only by default) for one ssh-rsa key; the rest after.
  assert.deepEqual(hostKeyAlgorithmsFor(hop), [
    'ecdsa-sha2-nistp384',
    'rsa-sha2-512',
    'rsa-sha2-256',
    'ssh-ed25519',
    'ecdsa-sha2-nistp256',
    'ecdsa-sha2-nistp521',
  ]);
  // HostKeyAlias names the entry; the global file counts too. The first choice is known: as it is.
  assert.deepEqual(hostKeyAlgorithmsFor({ ...hop, hostKeyAlias: 'alias-name' }), DEFAULT_HOST_KEY_ALGORITHMS);
  // Nothing known: ssh2's own order.
  assert.deepEqual(hostKeyAlgorithmsFor({ ...hop, hostName: 'elsewhere' }), DEFAULT_HOST_KEY_ALGORITHMS);
});

test('accept-new with no known_hosts file at all (UserKnownHostsFile none) refuses a new key: it has nowhere to keep it', () => {
  const hop = {
    alias: 'a',
    user: 'u',
    hostName: 'a.example',
    port: 22,
    knownHostsFiles: [],
    globalKnownHostsFiles: [],
    hostKeyPolicy: 'accept-new',
    hashKnownHosts: false,
  } as unknown as SshHop;
  const refusal = verifyHostKey(hop, ed25519Blob());
  assert.ok(refusal, 'refused');
  assert.match(refusal.message, /unknown host key .*\(not in any known_hosts file: UserKnownHostsFile and GlobalKnownHostsFile are none\)/);
});

test('HostKeyAlias is looked up in lower case, as ssh does: a hashed entry ssh wrote for it is found', () => {
  const key = ed25519Blob();
  const salt = randomBytes(20);
  const hashed = `|1|${salt.toString('base64')}|${createHmac('sha1', salt).update('mybastion').digest('base64')}`;
  const known = file('k-alias', `${hashed} ssh-ed25519 ${key.toString('base64')}\n`);
  const text = `Host b\n  HostName 127.0.0.1\n  HostKeyAlias MyBastion\n  UserKnownHostsFile ${known}\n  GlobalKnownHostsFile none\n`;
  const config = SshConfigFile.fromText(text, { file: path.join(dir, 'config'), home: dir, localUser: 'me' });
  const [hop] = resolveChain(config, 'b', { authSock: '' });
  assert.equal(hop!.hostKeyAlias, 'mybastion');
  assert.equal(verifyHostKey(hop!, key), undefined);
});

test('accept-new with a known_hosts that cannot be written: the key is let in and the failure reported, as ssh logs in', () => {
  const hop = {
    alias: 'a',
    user: 'u',
    hostName: 'a.example',
    port: 22,
    // Its directory is a regular file: nothing can be created under it (a read-only ~/.ssh alike).
    knownHostsFiles: [path.join(file('not-a-dir', 'x'), 'known_hosts')],
    globalKnownHostsFiles: [],
    hostKeyPolicy: 'accept-new',
    hashKnownHosts: false,
  } as unknown as SshHop;
  const reported: string[] = [];
  assert.equal(
    verifyHostKey(hop, ed25519Blob(), (f, err) => reported.push(`${f}: ${err.message}`)),
    undefined,
  );
  assert.equal(reported.length, 1);
  assert.match(reported[0]!, /not-a-dir\/known_hosts: .*(EEXIST|ENOTDIR)/);
});
