// IdentityFiles read as ssh reads them (authfile.c sshkey_load_public): keys made by the real
// ssh-keygen, in OpenSSH's format and in PEM, with and without a passphrase and a .pub.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadSsh2 } from '../../src/ssh/ssh2-lib.js';
import { openSshPublicKey, readIdentityFile } from '../../src/ssh/key-files.js';

const unavailable = spawnSync('sh', ['-c', 'command -v ssh-keygen']).status === 0 ? undefined : 'ssh-keygen is not installed';
const dir = mkdtempSync(path.join(tmpdir(), 'key-files-'));

/** A key made by ssh-keygen; returns its file and the base64 blob its .pub holds. */
function keygen(name: string, type: string, passphrase: string, format?: 'PEM'): { file: string; pub: string } {
  const file = path.join(dir, name);
  execFileSync('ssh-keygen', ['-q', '-t', type, '-N', passphrase, '-C', name, '-f', file, ...(format ? ['-m', format] : [])]);
  return { file, pub: readFileSync(`${file}.pub`, 'utf8').split(' ')[1]! };
}

before(async () => {
  await loadSsh2();
});
after(() => rmSync(dir, { recursive: true, force: true }));

test('an encrypted OpenSSH-format key: its public half without the passphrase, with or without a .pub', { skip: unavailable }, () => {
  const { file, pub } = keygen('enc_ed25519', 'ed25519', 'secret');
  assert.deepEqual(readIdentityFile(file), { publicKey: pub, encrypted: true });
  rmSync(`${file}.pub`);
  assert.deepEqual(readIdentityFile(file), { publicKey: pub, encrypted: true });
  assert.equal(openSshPublicKey(readFileSync(file)), pub);
});

test('an encrypted PEM key has no public part: known only from its .pub, as to ssh', { skip: unavailable }, () => {
  const { file, pub } = keygen('enc_ecdsa_pem', 'ecdsa', 'secret', 'PEM');
  assert.match(readFileSync(file, 'utf8'), /^-----BEGIN EC PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED/);
  assert.deepEqual(readIdentityFile(file), { publicKey: pub, encrypted: true });
  rmSync(`${file}.pub`);
  assert.deepEqual(readIdentityFile(file), { publicKey: undefined, encrypted: true });
});

test('FILE.pub wins over the public half in the file (sshkey_load_public order); a public key as IdentityFile is no private key', { skip: unavailable }, () => {
  const { file, pub } = keygen('plain', 'ed25519', '');
  const other = keygen('other', 'ed25519', '');
  const plain = readIdentityFile(file);
  assert.equal(plain.publicKey, pub);
  assert.deepEqual(plain.privateKey, readFileSync(file));
  writeFileSync(`${file}.pub`, readFileSync(`${other.file}.pub`));
  assert.equal(readIdentityFile(file).publicKey, other.pub);
  assert.deepEqual(readIdentityFile(`${other.file}.pub`), { publicKey: other.pub, encrypted: false });
});

test('a missing file is no key, though its .pub names one; a file that is no key is unreadable', { skip: unavailable }, () => {
  const { file, pub } = keygen('gone', 'ed25519', '');
  rmSync(file);
  assert.deepEqual(readIdentityFile(file), { publicKey: pub, encrypted: false });
  const junk = path.join(dir, 'junk');
  writeFileSync(junk, 'not a key\n');
  const read = readIdentityFile(junk);
  assert.equal(read.privateKey, undefined);
  assert.match(read.unreadable ?? '', /junk \(/);
  assert.equal(openSshPublicKey(Buffer.from('-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n')), undefined);
});
