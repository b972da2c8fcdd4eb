// `doctor --config` checks a konnectivity route of the file: its guest cluster's API (kubeconfig,
// api-server, RBAC without pods/portforward, which the route does not use) and its server, by a
// test dial through it to the guest's kubernetes Service — the simulated konnectivity server in
// each mode, over mutual TLS, dialling into the simulated guest's network. A working route is ok;
// a server that is down, one with no agent, and one that refuses our client certificate each fail
// with the fix for it. Doctor used to say nothing at all about konnectivity routes.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { startKonnectivityBed, type KonnectivityBed } from '../helpers/konnectivity.js';
import { startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { runDoctor } from '../helpers/doctor.js';
import type { KonnectivitySpec } from '../../src/konnectivity/options.js';

let guest: TestCluster;
let n = 0;

before(async () => {
  guest = await startTestCluster();
});
after(async () => {
  await guest?.close();
});

async function doctor(spec: KonnectivitySpec) {
  const config = path.join(guest.dir, `konnectivity-${++n}.yaml`);
  const files = (['ca', 'cert', 'key'] as const).flatMap((k) => (spec[k] ? [`      ${k}: ${spec[k]}`] : []));
  await writeFile(
    config,
    [
      'routes:',
      '  - name: guest',
      '    kind: konnectivity',
      '    context: sim',
      '    konnectivity:',
      `      server: ${spec.server}`,
      `      mode: ${spec.mode}`,
      ...files,
      '',
    ].join('\n'),
  );
  return runDoctor(['--kubeconfig', guest.kubeconfig, '--config', config, '--request-timeout', '5s'], path.join(guest.dir, `state-${n}`));
}

for (const mode of ['grpc', 'http-connect'] as const) {
  describe(`a konnectivity route (${mode})`, () => {
    let bed: KonnectivityBed;
    before(async () => {
      bed = await startKonnectivityBed(mode, 'tls');
      // The guest's kubernetes Service, as its kube-proxy maps it: to the API server.
      bed.network.set('127.96.0.1', 443, { host: '127.0.0.1', port: Number(new URL(guest.sim.server).port) });
    });
    after(async () => {
      await bed?.close();
    });

    test('that works: the guest API and the server are ok, the agent dialled the kubernetes Service; exit 0', async () => {
      const r = await doctor(bed.spec);
      assert.equal(r.code, 0, r.out);
      const k = r.get('konnectivity');
      assert.equal(k.scope, 'guest');
      assert.equal(k.status, 'ok', r.out);
      assert.match(
        k.detail,
        new RegExp(`^${bed.spec.server} \\(${mode}\\) took the connection; its agent dialled the kubernetes Service \\(127\\.96\\.0\\.1:443\\) in \\d+ ms$`),
      );
      assert.equal(r.get('api-server').scope, 'guest');
      assert.equal(r.get('rbac').status, 'ok');
      assert.doesNotMatch(r.get('rbac').detail, /portforward/, 'the route needs no pods/portforward');
      assert.equal(r.all('port-forward').length, 0, r.out);
      assert.ok(r.ms < 10_000, `took ${r.ms} ms`);
    });

    test('whose server refuses our client certificate (none given): fail, the fix names cert and key', async () => {
      const r = await doctor({ ...bed.spec, cert: undefined, key: undefined });
      assert.equal(r.code, 1, r.out);
      const k = r.get('konnectivity');
      assert.equal(k.status, 'fail', r.out);
      assert.match(k.detail, /certificate required/);
      assert.match(k.fix!, /refused our client certificate: give route guest .* cert and key signed by the CA the server trusts/);
    });

    test('whose server has no agent: fail, the fix points at the agent pods', async () => {
      bed.server.noAgent = true;
      try {
        const r = await doctor(bed.spec);
        const k = r.get('konnectivity');
        assert.equal(k.status, 'fail', r.out);
        assert.match(k.detail, /has no agent/);
        assert.match(k.fix!, /no konnectivity agent connected: check the konnectivity-agent pods/);
      } finally {
        bed.server.noAgent = false;
      }
    });

    test('whose server is down: fail, the fix says nothing listens there', async () => {
      await bed.server.stop();
      const r = await doctor(bed.spec);
      assert.equal(r.code, 1, r.out);
      const k = r.get('konnectivity');
      assert.equal(k.status, 'fail', r.out);
      assert.match(k.detail, /ECONNREFUSED/);
      assert.equal(
        k.fix,
        `nothing listens at ${bed.spec.server}: is the konnectivity server running, and is that its frontend port (--server-port, often 8090 or 8131)?`,
      );
      assert.ok(r.ms < 10_000, `took ${r.ms} ms`);
    });
  });
}
