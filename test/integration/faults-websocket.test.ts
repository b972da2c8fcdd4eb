// The fault and keepalive suites again, on the per-stream WebSocket transport (v4.channel.k8s.io):
// what auto falls back to for API servers without the SPDY tunnel. The default run covers auto.
process.env.PROXYOUT_TEST_TRANSPORT = 'websocket';
await import('./faults.test.js');
await import('./keepalive.test.js');
