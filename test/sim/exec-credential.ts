// Exec credential plugin used by kubeconfigs written with auth: 'exec' (run as `node <this file>`).
// Prints a client.authentication.k8s.io ExecCredential (staging/src/k8s.io/client-go/pkg/apis/
// clientauthentication/v1/types.go) carrying the token from SIM_EXEC_TOKEN.
//   SIM_EXEC_TTL_SECONDS  expirationTimestamp = now + TTL (default 3600; 0 = omit the field)
//   SIM_EXEC_LOG          if set, a line is appended to this file on every invocation
//   SIM_EXEC_REQUIRE_INFO if set, fail unless KUBERNETES_EXEC_INFO is the ExecCredential client-go
//                         sends (kind, apiVersion, spec.interactive); with SIM_EXEC_EXPECT_SERVER
//                         also spec.cluster.server (provideClusterInfo: true)
// Note: @kubernetes/client-node 1.x caches an exec credential only while it has a future
// expirationTimestamp; without one it runs the plugin again for every request.
import { appendFileSync } from 'node:fs';

const token = process.env.SIM_EXEC_TOKEN;
if (!token) {
  process.stderr.write('exec-credential: SIM_EXEC_TOKEN is not set\n');
  process.exit(1);
}
let apiVersion = 'client.authentication.k8s.io/v1';
let info: { apiVersion?: string; kind?: string; spec?: { interactive?: boolean; cluster?: { server?: string } } } | undefined;
try {
  info = JSON.parse(process.env.KUBERNETES_EXEC_INFO ?? '') as typeof info;
  if (info?.apiVersion) apiVersion = info.apiVersion;
} catch {
  // no exec info
}
if (process.env.SIM_EXEC_REQUIRE_INFO) {
  const expectServer = process.env.SIM_EXEC_EXPECT_SERVER;
  const problem = !info
    ? 'KUBERNETES_EXEC_INFO is not set'
    : info.kind !== 'ExecCredential'
      ? `KUBERNETES_EXEC_INFO kind ${info.kind}`
      : info.apiVersion !== 'client.authentication.k8s.io/v1'
        ? `KUBERNETES_EXEC_INFO apiVersion ${info.apiVersion}`
        : info.spec?.interactive !== false
          ? 'KUBERNETES_EXEC_INFO spec.interactive is not false'
          : expectServer && info.spec?.cluster?.server !== expectServer
            ? `KUBERNETES_EXEC_INFO spec.cluster.server ${info.spec?.cluster?.server}`
            : undefined;
  if (problem) {
    process.stderr.write(`exec-credential: ${problem}\n`);
    process.exit(1);
  }
}
const ttl = Number(process.env.SIM_EXEC_TTL_SECONDS ?? '3600');
const status: Record<string, string> = { token };
if (ttl > 0) status.expirationTimestamp = new Date(Date.now() + ttl * 1000).toISOString().replace(/\.\d+Z$/, 'Z');
if (process.env.SIM_EXEC_LOG) appendFileSync(process.env.SIM_EXEC_LOG, `${new Date().toISOString()} ${process.pid}\n`);
process.stdout.write(JSON.stringify({ apiVersion, kind: 'ExecCredential', status }) + '\n');
