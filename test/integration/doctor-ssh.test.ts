// `doctor --config` checks an ssh route of the file by logging in through its chain, real OpenSSH
// jump hosts (test/helpers/ssh-lab.ts: jump1 on loopback, jump2 behind it): a chain that works is
// ok hop by hop; a changed host key, an unknown one and a key the hop refuses each fail at the hop
// they are about, with the fix for it, and the hops after it are not tried. Doctor used to say
// nothing at all about ssh routes.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { sshLabUnavailable, startSshLab, JUMP2, type SshLab } from '../helpers/ssh-lab.js';
import { runDoctor } from '../helpers/doctor.js';
import { startTestCluster, type TestCluster } from '../helpers/cluster.js';

const unavailable = sshLabUnavailable();
if (unavailable) console.log(`# skipping the doctor ssh tests: ${unavailable}`);
let lab: SshLab;
/** The table needs a cluster to serve: the simulated one, as the kubeconfig's current context. */
let cluster: TestCluster;
let home = '';
let config = '';
let knownHosts = '';
let n = 0;

before(async () => {
  if (unavailable) return;
  [lab, cluster] = await Promise.all([startSshLab(), startTestCluster()]);
  home = path.join(lab.dir, 'home');
  mkdirSync(path.join(home, '.ssh'), { recursive: true, mode: 0o700 });
  knownHosts = path.join(home, '.ssh', 'known_hosts');
  config = path.join(lab.dir, 'proxyout.yaml');
  writeFileSync(config, ['routes:', '  - name: jump', '    kind: ssh', '    ssh: { host: jump2 }', '    include: [internal]', ''].join('\n'));
});
after(async () => {
  await lab?.close();
  await cluster?.close();
});

/** doctor with ~/.ssh/config using `identity` and known_hosts holding `known`. */
function doctor(known: string[], identity = lab.userKey) {
  writeFileSync(knownHosts, known.join('\n') + '\n');
  copyFileSync(lab.writeConfig('ssh-config', { all: [`IdentityFile ${identity}`, `UserKnownHostsFile ${knownHosts}`] }), path.join(home, '.ssh', 'config'));
  return runDoctor(['--kubeconfig', cluster.kubeconfig, '--config', config, '--request-timeout', '5s'], path.join(lab.dir, `state-${++n}`), {
    HOME: home,
    SSH_AUTH_SOCK: '',
  });
}

test('an ssh route whose chain works: every hop ok, exit 0, in the JSON report', { skip: unavailable }, async () => {
  const r = await doctor([lab.knownHostsLines.jump1, lab.knownHostsLines.jump2]);
  assert.equal(r.code, 0, r.out);
  assert.equal(r.get('ssh-config').scope, 'jump');
  assert.equal(r.get('ssh-config').status, 'ok');
  assert.match(r.get('ssh-config').detail, /ssh jump2: jump1 → jump2/);
  const hops = r.all('ssh-hop');
  assert.deepEqual(
    hops.map((h) => [h.scope, h.status]),
    [
      ['jump', 'ok'],
      ['jump', 'ok'],
    ],
    r.out,
  );
  assert.match(hops[0]!.detail, /^hop 1\/2 jump1 \(root@127\.0\.0\.1:\d+\): host key accepted, logged in$/);
  assert.match(hops[1]!.detail, new RegExp(`^hop 2/2 jump2 \\(root@${JUMP2.host}:${JUMP2.port}\\): host key accepted, logged in \\(whole chain: \\d+ ms\\)$`));
  assert.equal(r.get('api-server').status, 'ok', 'the current context is checked as before');
  assert.ok(r.ms < 10_000, `took ${r.ms} ms`);
});

test("jump2's host key changed: hop 2 fails with the fingerprint and the ssh-keygen -R fix; hop 1 is ok", { skip: unavailable }, async () => {
  // jump1's key listed under jump2's name: the key jump2 offers is not the one on file.
  const wrong = lab.knownHostsLines.jump1.replace(/^\S+/, `[${JUMP2.host}]:${JUMP2.port}`);
  const r = await doctor([lab.knownHostsLines.jump1, wrong]);
  assert.equal(r.code, 1, r.out);
  const [hop1, hop2] = r.all('ssh-hop');
  assert.equal(hop1!.status, 'ok', r.out);
  assert.equal(hop2!.status, 'fail', r.out);
  assert.match(hop2!.detail, /^hop 2\/2 ssh hop jump2 .*HOST KEY CHANGED/);
  assert.ok(hop2!.detail.includes(lab.fingerprints.jump2), hop2!.detail);
  assert.ok(hop2!.fix?.includes(`ssh-keygen -R '[${JUMP2.host}]:${JUMP2.port}' -f ${knownHosts}`), hop2!.fix);
  assert.match(hop2!.fix!, /someone may be intercepting/);
});

test("jump2's host key unknown: hop 2 fails, the fix says to check the fingerprint and connect once with ssh", { skip: unavailable }, async () => {
  const r = await doctor([lab.knownHostsLines.jump1]);
  assert.equal(r.code, 1, r.out);
  const hop2 = r.all('ssh-hop')[1]!;
  assert.equal(hop2.status, 'fail', r.out);
  assert.match(hop2.detail, /unknown host key/);
  assert.match(hop2.fix!, /check the fingerprint .*`ssh jump2`.*StrictHostKeyChecking accept-new/);
});

test('a key jump1 refuses: hop 1 fails naming authorized_keys, hop 2 is not tried', { skip: unavailable }, async () => {
  const other = path.join(lab.dir, 'other_key');
  if (!existsSync(other)) spawnSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', other]);
  const r = await doctor([lab.knownHostsLines.jump1, lab.knownHostsLines.jump2], other);
  assert.equal(r.code, 1, r.out);
  const [hop1, hop2] = r.all('ssh-hop');
  assert.equal(hop1!.status, 'fail', r.out);
  assert.match(hop1!.detail, /^hop 1\/2 ssh hop jump1 .*refused our keys/);
  assert.match(hop1!.fix!, /root@jump1 did not accept our keys: add your public key to ~root\/\.ssh\/authorized_keys/);
  assert.equal(hop2!.status, 'skip');
  assert.match(hop2!.detail, /not tried \(jump1 failed\)/);
});
