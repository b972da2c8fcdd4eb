// `kubectl proxyout doctor`: checks what the proxy needs, per cluster route and on this machine,
// and says how to fix each failure. Exit 1 when any check fails.
import { Command, Flags } from '@oclif/core';
import { DEFAULTS } from '../proxy/options.js';
import { NoClusterToServeError, loadRoutingTable } from '../config/load.js';
import { loadKubeConfig } from '../cluster/kubeconfig.js';
import { errorMessage } from '../core/errors.js';
import { checkCluster } from '../doctor/cluster.js';
import { DoctorEgress } from '../doctor/egress.js';
import { checkSshRoute } from '../doctor/ssh.js';
import { checkKonnectivity } from '../doctor/konnectivity.js';
import type { ClusterRouteSpec, KonnectivityRouteSpec, SshRouteSpec } from '../routes/spec.js';
import { checkDaemons, checkListen, checkStateDir, runningProxies } from '../doctor/local.js';
import { exitCodeOf, renderChecks, type Check } from '../doctor/report.js';
import { parseDuration } from '../core/duration.js';
import { durationFlag, namespaceFlag } from '../cli/flags.js';
import { tableFlagDefinitions } from '../cli/table-flags.js';
import { jsonObject, printJson } from '../cli/json-output.js';
import type { ProxyStatus } from '../managed/status.js';
import { NewerEntryError } from '../managed/store.js';

export default class Doctor extends Command {
  static override summary =
    'Check the kubeconfig, API server, port-forward protocols, RBAC, ssh and konnectivity routes and local state; say how to fix what fails.';
  static override description = [
    'For each cluster route (the --context given, else the config file routes, else the current context):',
    'the kubeconfig loads (auth kind, exec plugin on PATH), the API server answers, reached as the proxy reaches it',
    "(proxy-url or HTTPS_PROXY, --extra-ca / extra-ca, a route's via; version, round trip),",
    'which port-forward protocols it offers, and RBAC (SelfSubjectAccessReview) for list/watch on Services and',
    'EndpointSlices, list/get on Pods and get/create on pods/portforward. For each ssh route of the config file: a login',
    'through its whole chain as the route logs in (each hop reached, its host key known, our key accepted), naming the',
    'hop that fails. For each konnectivity route: its guest cluster as above (RBAC without pods/portforward), and a',
    "test dial through its server (mode, TLS files) to the guest's kubernetes Service: server reachable, our",
    'certificate taken, an agent connected, the guest network reached. Locally: the listen addresses are free, the',
    'state directory is private, running managed proxies answer. Exit status 1 when a check fails.',
  ].join(' ');
  static override usage = 'doctor [--context C]… [--config F] [-n NS] [--extra-ca F] [--request-timeout T] [--json]';
  static override examples = ['<%= config.bin %> doctor', '<%= config.bin %> doctor --context staging --json'];

  static override flags = {
    kubeconfig: Flags.string({ summary: 'Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).', helpValue: '<file>' }),
    context: Flags.string({ summary: 'Check this context (repeatable).', helpValue: '<name>', multiple: true }),
    config: Flags.string({ summary: 'Check the routes of this config file.', helpValue: '<file>' }),
    'extra-ca': tableFlagDefinitions()['extra-ca'],
    namespace: namespaceFlag("Check RBAC and the pods in this namespace for the default route, as the proxy's -n serves it."),
    'listen-socks': Flags.string({ summary: 'SOCKS5 listen address to check.', helpValue: '<addr>', default: DEFAULTS.listenSocks }),
    'listen-http': Flags.string({ summary: 'HTTP proxy listen address to check.', helpValue: '<addr>' }),
    // kubectl's name for a per-request bound; --timeout is the old spelling.
    'request-timeout': durationFlag(
      "Time each API request, each ssh route's login through its chain and each konnectivity test dial may take.",
      10_000,
      false,
      ['timeout'],
    ),
    json: Flags.boolean({ summary: 'Print the checks as JSON: {apiVersion, kind: "DoctorReport", ok, checks: [{scope, name, status, detail, fix}]}.' }),
  };

  async run(): Promise<void> {
    const { flags } = await this.parse(Doctor);
    const timeoutMs = parseDuration(flags['request-timeout']);
    const checks: Check[] = [];
    let contexts: Array<{ scope: string; context?: string; route?: ClusterRouteSpec | KonnectivityRouteSpec }> = [];
    let sshRoutes: SshRouteSpec[] = [];
    let egress: DoctorEgress | undefined;
    let defaultRoute: string | undefined;
    let kubeconfigFailed = false;
    try {
      let currentContext: string | undefined;
      try {
        currentContext = loadKubeConfig({ kubeconfig: flags.kubeconfig }).context;
      } catch {
        kubeconfigFailed = true; // reported by the kubeconfig check below
      }
      const table = loadRoutingTable({
        config: flags.config,
        contexts: flags.context ?? [],
        clusterDomain: DEFAULTS.clusterDomain,
        currentContext,
        extraCA: flags['extra-ca'],
      });
      contexts = table.routes.flatMap((r) => (r.kind === 'cluster' || r.kind === 'konnectivity' ? [{ scope: r.name, context: r.context, route: r }] : []));
      defaultRoute = table.defaultRoute;
      sshRoutes = table.routes.flatMap((r) => (r.kind === 'ssh' ? [r] : []));
      egress = new DoctorEgress(table);
      if (egress.extraCAProblem) {
        checks.push({
          scope: 'config',
          name: 'extra-ca',
          status: 'fail',
          detail: egress.extraCAProblem,
          fix: 'give --extra-ca (config: extra-ca) a readable PEM bundle holding the CA of the proxy that intercepts TLS',
        });
      }
    } catch (err) {
      // No route, and no current context since the kubeconfig did not load: its check says why.
      if (kubeconfigFailed && err instanceof NoClusterToServeError) contexts = [{ scope: 'current-context' }];
      else
        checks.push({
          scope: 'config',
          name: 'routes',
          status: 'fail',
          detail: errorMessage(err),
          fix: 'fix the config file or the --context flags (see docs/usage.md "Config file")',
        });
    }
    if (contexts.length === 0 && checks.length === 0) contexts = [{ scope: 'current-context' }];
    // The routes that carry others first: a cluster route's failing API check through a chain
    // then follows the check that says which hop of it fails.
    for (const route of sshRoutes) checks.push(...(await checkSshRoute(route, { timeoutMs })));
    try {
      for (const c of contexts) {
        const { route } = c;
        const reach = egress;
        const routeEgress = route && reach ? () => reach.for(route) : undefined;
        const konnectivity = route?.kind === 'konnectivity' ? route : undefined;
        const found = await checkCluster({
          kubeconfig: flags.kubeconfig,
          context: c.context,
          // -n is the default route's, as for the proxy (no table: the current context's).
          namespace: c.scope === defaultRoute || !c.route ? flags.namespace : undefined,
          scope: c.scope,
          timeoutMs,
          egress: routeEgress,
          konnectivity: konnectivity && ((api) => checkKonnectivity(konnectivity, api, timeoutMs)),
        });
        checks.push(...found);
        // The test dial's address comes from the guest's API server: say why there was none.
        if (konnectivity && !found.some((f) => f.name === 'konnectivity')) {
          checks.push({
            scope: c.scope,
            name: 'konnectivity',
            status: 'skip',
            detail: `${konnectivity.konnectivity.server}: not checked: the test dial goes to the guest's kubernetes Service, and the guest's API server (above) did not tell its address`,
          });
        }
      }
    } finally {
      await egress?.close();
    }

    let running: ProxyStatus[] | undefined;
    try {
      running = await runningProxies();
    } catch (err) {
      checks.push({
        scope: 'local',
        name: 'daemon',
        status: 'fail',
        detail: `cannot read the managed proxies: ${errorMessage(err)}`,
        fix:
          err instanceof NewerEntryError
            ? 'run `kubectl proxyout doctor` with the newer kubectl-proxyout (`type -a kubectl-proxyout` lists those on your PATH)'
            : 'see the state-dir check',
      });
    }
    const listen = [
      { flag: '--listen-socks', address: flags['listen-socks'] },
      ...(flags['listen-http'] ? [{ flag: '--listen-http', address: flags['listen-http'] }] : []),
    ].filter((a) => a.address !== 'off');
    checks.push(...(await checkListen(listen, running ?? [])));
    checks.push(...checkStateDir());
    // Unread, they are not "no managed proxies".
    if (running) checks.push(...checkDaemons(running, this.config.version));

    const code = exitCodeOf(checks);
    this.log(flags.json ? printJson(jsonObject('DoctorReport', { ok: code === 0, checks })) : renderChecks(checks));
    if (code !== 0) this.exit(code);
  }
}
