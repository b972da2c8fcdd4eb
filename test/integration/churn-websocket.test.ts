// The churn suite again, on per-stream WebSockets (v4.channel.k8s.io).
process.env.PROXYOUT_TEST_TRANSPORT = 'websocket';
await import('./churn.test.js');
