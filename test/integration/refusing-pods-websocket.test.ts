// The refusing-pod and pod re-creation suite again, on per-stream WebSockets (v4.channel.k8s.io).
process.env.PROXYOUT_TEST_TRANSPORT = 'websocket';
await import('./refusing-pods.test.js');
