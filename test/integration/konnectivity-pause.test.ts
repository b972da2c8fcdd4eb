// A konnectivity route's gRPC connection after the process was paused (a laptop asleep): it may be
// dead without a sign, and gRPC's keepalive (kept above upstream's 5-minute ping policy) would take
// almost 6 minutes to notice. Against the simulated konnectivity server behind a relay that can go
// silent.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createKonnectivityDialer } from '../../src/konnectivity/dialer.js';
import { GUEST, startKonnectivityBed } from '../helpers/konnectivity.js';
import { startFreezableProxy } from '../helpers/freezable-proxy.js';
import { echoes } from '../helpers/streams.js';

test('grpc: after a pause, a connection gone silent is replaced, and a new dial does not wait for its keepalive', async () => {
  const bed = await startKonnectivityBed('grpc', 'tls');
  const relay = await startFreezableProxy(Number(new URL(bed.server.address).port));
  const dialer = await createKonnectivityDialer({ ...bed.spec, server: `https://127.0.0.1:${new URL(relay.url).port}` });
  try {
    const old = await dialer.dial(GUEST.echo.ip, GUEST.echo.port, AbortSignal.timeout(5000));
    assert.equal(await echoes(old), 'ping');
    old.on('error', () => undefined);
    // The laptop slept; the path to the server is gone, and nothing says so.
    assert.equal(relay.freeze(), 1);
    dialer.afterPause?.();
    const fresh = await dialer.dial(GUEST.echo.ip, GUEST.echo.port, AbortSignal.timeout(5000));
    assert.equal(await echoes(fresh), 'ping');
    fresh.destroy();
    old.destroy();
  } finally {
    dialer.close();
    await relay.close();
    await bed.close();
  }
});
