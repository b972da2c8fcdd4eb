// Exec credential plugin used by kubeconfigs written with auth: 'exec' (run as `node <this file>`).
// Prints a client.authentication.k8s.io ExecCredential (staging/src/k8s.io/client-go/pkg/apis/
// clientauthentication/v1/types.go) carrying the token from SIM_EXEC_TOKEN.
//   SIM_EXEC_TTL_SECONDS  expirationTimestamp = now + TTL (default 3600; 0 = omit the field)
//   SIM_EXEC_LOG          if set, a line is appended to this file on every invocation
// Note: @kubernetes/client-node 1.x caches an exec credential only while it has a future
// expirationTimestamp; without one it runs the plugin again for every request.
import { appendFileSync } from 'node:fs';

const token = process.env.SIM_EXEC_TOKEN;
if (!token) {
  process.stderr.write('exec-credential: SIM_EXEC_TOKEN is not set\n');
  process.exit(1);
}
let apiVersion = 'client.authentication.k8s.io/v1';
try {
  const info = JSON.parse(process.env.KUBERNETES_EXEC_INFO ?? '') as { apiVersion?: string };
  if (info.apiVersion) apiVersion = info.apiVersion;
} catch {
  // no exec info (client-node does not send it)
}
const ttl = Number(process.env.SIM_EXEC_TTL_SECONDS ?? '3600');
const status: Record<string, string> = { token };
if (ttl > 0) status.expirationTimestamp = new Date(Date.now() + ttl * 1000).toISOString().replace(/\.\d+Z$/, 'Z');
if (process.env.SIM_EXEC_LOG) appendFileSync(process.env.SIM_EXEC_LOG, `${new Date().toISOString()} ${process.pid}\n`);
process.stdout.write(JSON.stringify({ apiVersion, kind: 'ExecCredential', status }) + '\n');
