// `connect`: check everything that can be checked before forking (kubeconfig, context, the API
// server with these credentials, the listen ports), then start a detached daemon from a
// transient kubeconfig and wait until it listens with synced caches, or report its error.
import { spawn } from 'node:child_process';
import { closeSync, fchmodSync, openSync } from 'node:fs';
import path from 'node:path';
import { StartupError, errorMessage } from '../core/errors.js';
import { selfInvocation, selfProgramName, workingDirectory } from '../core/self.js';
import { formatHostPort, unixListenPath, UNIX_PREFIX, type HostPort } from '../core/address.js';
import { ApiConnection } from '../cluster/api.js';
import { loadExtraCA } from '../cluster/egress-proxy.js';
import { probeApi } from '../proxy/proxy.js';
import { bindRefusal } from '../listeners/loopbacks.js';
import { planStart, tcpAddressesOf, type StartPlan } from '../proxy/startup-checks.js';
import {
  checkSocketPath,
  ensureStateDir,
  layout,
  STATE_DIR_ENV,
  unixSocketPath,
  validateNewId,
  EXEC_LOG_ID,
  StateDirError,
  type StateLayout,
} from '../state/paths.js';
import { withStateLock } from '../state/lock.js';
import { defaultConfigPath } from '../config/load.js';
import { controlSocketOf, describeTarget, readEntry, removeEntry, updateEntry, writeEntry, type DaemonOptions, type ProxyEntry } from './store.js';
import { absolute, credentialIdentity, recordedKubeconfigEnv, managedId, resolveManagedTable, writeRouteKubeconfigs } from './table.js';
import { isAlive, isOurDaemon, processIdentity, systemHost } from '../state/process.js';
import { recordedSpace } from '../state/process-space.js';
import { inspect, inspectAll, whereItRuns } from './registry.js';
import { signal, stopProxy, UnknownIdError } from './stop.js';
import { PROXY_AUTH_ENV, type ProxyCredentials } from '../auth/credentials.js';
import { daemonEnv } from './daemon-env.js';
import { generateCredentials, readClientAuthFile, writeClientAuthFile, writeProxyAuthFile } from '../state/proxy-auth.js';
import { assertSameSettings, assertSameTarget, type RequestedSettings, type Target } from './settings.js';
import { testHookPause } from '../core/test-hooks.js';
import { StartProgress } from './start-progress.js';
import { ConnectInterrupted, Interrupts } from './interrupts.js';
import { stoppedWhileStarting } from './logs.js';

/** Test hook (core/test-hooks.ts testHookPause): hold a connect that found no daemon before it takes the state lock. */
export const TEST_CONNECT_PAUSE_ENV = 'KUBECTL_PROXYOUT_TEST_CONNECT_PAUSE';

const POLL_MS = 100;

export interface ConnectRequest {
  kubeconfig?: string;
  context?: string;
  namespace?: string;
  id?: string;
  options: DaemonOptions;
  /** Handed to the daemon in a 0600 file beside its kubeconfig, never on argv or in state.json. */
  proxyAuth?: ProxyCredentials;
  /**
   * No proxy credentials (`--no-proxy-auth`: browsers such as Chrome cannot send SOCKS credentials).
   * Without it and without proxyAuth, a new proxy gets generated ones.
   */
  noAuth?: boolean;
  /** Flags given on the command line: a running proxy for the ID must match these (settings.ts). */
  explicitFlags?: ReadonlySet<string>;
  /** This kubectl-proxyout's version, recorded in the entry: `status` and `connect` name a daemon of another one. */
  programVersion?: string;
}

export interface ConnectResult {
  entry: ProxyEntry;
  /** True when the ID was already running (or starting) and nothing new was started. */
  existing: boolean;
  logFile: string;
  /** The credentials `connect` generated for this proxy (now or when it started): they go into the printed lines. */
  generatedAuth?: { username: string; password: string };
}

export async function connect(req: ConnectRequest): Promise<ConnectResult> {
  // Whatever a caller passes in options, credentials never reach state.json.
  const { proxyAuth: _stray, ...daemonOptions } = req.options as DaemonOptions & { proxyAuth?: unknown };
  req = { ...req, options: withUnixPaths(daemonOptions, layout().root) };
  const contexts = req.options.contexts?.length ? req.options.contexts : req.context ? [req.context] : [];
  const managed = resolveManagedTable({
    kubeconfig: req.kubeconfig,
    contexts,
    config: req.options.config,
    direct: req.options.direct,
    clusterDomain: req.options.clusterDomain,
    extraCA: req.options.extraCA,
    namespace: req.namespace,
  });
  // The daemon's own start-up checks (proxy/startup-checks.ts), made here so a refusal is the
  // caller's error at once: listen addresses, credentials off loopback (only the caller's count:
  // the unit of trust is the user who gave them), direct pass-through, the mappings of the flags
  // and of the config file alike.
  const listens = listensOf(planStart({ ...req.options, table: managed.table, proxyAuth: req.proxyAuth }));
  const kube = managed.primary;
  // A table without a cluster route (ssh, direct, reject): no context, namespace or server to record.
  const target: Target = kube
    ? { server: kube.server, context: kube.context, namespace: kube.namespace, credentials: credentialIdentity(kube, req.kubeconfig) }
    : { server: '', context: '', namespace: '' };
  // What the daemon serves is this resolved table; `reload` makes it again from the same inputs.
  req = {
    ...req,
    options: {
      ...req.options,
      table: managed.table,
      contexts,
      config: absolute(req.options.config),
      // reload reads the file connect read, not the one of its own shell's XDG_CONFIG_HOME or HOME.
      defaultConfig: req.options.config === undefined ? defaultConfigPath() : undefined,
      kubeconfigSource: absolute(req.kubeconfig),
      kubeconfigEnv: req.kubeconfig ? undefined : recordedKubeconfigEnv(),
    },
  };
  const id = req.id !== undefined ? validateNewId(req.id) : managedId(managed);
  if (id === EXEC_LOG_ID)
    throw new StateDirError(`connection ID "${id}" is taken by the log of exec's temporary proxies (kubectl proxyout logs ${id}): use another`);
  const l = ensureStateDir(layout());
  checkSocketPath(l.controlSocket(id));
  const result = (entry: ProxyEntry, existing: boolean): ConnectResult => ({
    entry,
    existing,
    logFile: l.logFile(id),
    generatedAuth: entry.proxyAuthGenerated ? readClientAuthFile(l, id) : undefined,
  });

  const requested: RequestedSettings = {
    options: req.options,
    explicitFlags: req.explicitFlags ?? new Set(),
    proxyAuthUser: req.proxyAuth?.username,
    proxyAuthOff: req.noAuth,
  };
  const running = await existingProxy(l, id, target);
  if (running) return result(assertSameSettings(running, requested), true);

  // One cluster: fail fast, before forking. With several, the daemon starts as long as one serves.
  if (kube && managed.table.routes.length === 1) {
    await probeApi(new ApiConnection(kube.kc, managed.table.extraCA ? { extraCA: loadExtraCA(managed.table.extraCA) } : {}), kube.context, kube.server);
  }

  await testHookPause(TEST_CONNECT_PAUSE_ENV);
  // From here on, Ctrl-C undoes the start instead of leaving a daemon the user gave up on.
  const interrupts = new Interrupts();
  try {
    const started = await withStateLock(l, async () => {
      interrupts.arm();
      // Re-check under the lock: a concurrent `connect` for the same ID may have won the race.
      const current = inspect(l, id);
      if (current?.state === 'elsewhere') throw elsewhereInUse(current.entry);
      if (current && current.state !== 'dead') return { entry: assertSameSettings(assertSameTarget(current.entry, target), requested), existing: true };
      if (current) removeEntry(l, id);
      await checkPorts(l, listens);
      // Other local users can reach a loopback port too: a proxy that lives all day gets a password
      // unless the caller gave one or asked for none.
      const generated = !req.proxyAuth && !req.noAuth;
      const credentials = req.proxyAuth ?? (generated ? generateCredentials() : undefined);
      const entry: ProxyEntry = {
        version: 1,
        id,
        ...target,
        options: req.options,
        ...(credentials ? { proxyAuthUser: credentials.username } : {}),
        ...(generated ? { proxyAuthGenerated: true } : {}),
        phase: 'starting',
        createdAt: new Date().toISOString(),
        // What its command line will name: a renamed single executable is still our daemon.
        program: selfProgramName(),
        ...(req.programVersion ? { programVersion: req.programVersion } : {}),
        // Recorded before the daemon starts: an entry left by a `connect` interrupted elsewhere is
        // not reaped here.
        space: recordedSpace(),
        ...(path.dirname(l.controlSocket(id)) === l.proxyDir(id) ? {} : { controlSocket: l.controlSocket(id) }),
      };
      try {
        writeEntry(l, entry);
        writeRouteKubeconfigs(l, id, managed);
        if (credentials) writeProxyAuthFile(l, id, credentials);
        if (generated && credentials) writeClientAuthFile(l, id, credentials);
        // Nothing is started for a connect given up on meanwhile (the catch removes the entry).
        interrupts.check();
        const pid = spawnDaemon(l, id);
        return { entry: updateEntry(l, id, (e) => ((e.pid = pid), (e.procIdentity = processIdentity(pid))))!, existing: false };
      } catch (err) {
        removeEntry(l, id);
        // A full or read-only disk: one line naming where, not a bare errno (see docs/troubleshooting.md).
        const e = err as NodeJS.ErrnoException;
        if (['open', 'write', 'mkdir', 'rename', 'chmod', 'fchmod', 'close'].includes(e.syscall ?? '')) {
          throw new StartupError(`cannot write the proxy's files in ${l.proxyDir(id)}: ${e.message}`, { cause: err });
        }
        throw err;
      }
    });
    if (started.existing) return result(assertSameSettings(await waitForReady(l, id, false, interrupts), requested), true);
    return result(await waitForReady(l, id, started.entry.createdAt, interrupts), false);
  } finally {
    interrupts.dispose();
  }
}

/** A live entry for the ID (waiting while it starts), or undefined when a new one is needed. */
async function existingProxy(l: StateLayout, id: string, target: Target): Promise<ProxyEntry | undefined> {
  const current = await withStateLock(l, () => inspect(l, id));
  if (!current || current.state === 'dead') return undefined;
  if (current.state === 'elsewhere') throw elsewhereInUse(current.entry);
  assertSameTarget(current.entry, target);
  if (current.state === 'stopping') {
    // Being disconnected right now: see the stop through, as a second `disconnect` would (killed,
    // at worst), then start afresh. Only waiting for it left a daemon whose stopper was interrupted
    // (Ctrl-C on a disconnect of a hung one) "still stopping" for every connect, for ever.
    await stopProxy(l, id).catch((err: unknown) => {
      if (!(err instanceof UnknownIdError)) throw err;
    });
    return undefined;
  }
  return waitForReady(l, id, false);
}

/** The ID is taken by a proxy this machine cannot see or stop: start one under another ID, or forget that one. */
function elsewhereInUse(entry: ProxyEntry): StartupError {
  return new StartupError(
    `ID ${entry.id} is in use by a proxy that runs elsewhere (${whereItRuns(entry)}); ` +
      `connect with another --id, or forget that one here with: kubectl proxyout disconnect ${entry.id} --forget`,
  );
}

/** unix:, unix:NAME and relative paths made absolute here: the daemon and `status` see the real file. */
function withUnixPaths(options: DaemonOptions, root: string): DaemonOptions {
  const resolve = (text: string | undefined, kind: 'socks' | 'http') => {
    const unix = text === undefined ? undefined : unixListenPath(text);
    if (unix === undefined) return text;
    try {
      return `${UNIX_PREFIX}${unixSocketPath(unix, kind, root)}`;
    } catch (err) {
      throw new StartupError(`--listen-${kind} ${text}: ${errorMessage(err)}`);
    }
  };
  return { ...options, listenSocks: resolve(options.listenSocks, 'socks'), listenHttp: resolve(options.listenHttp, 'http') };
}

/** The TCP listeners and port mappings the plan binds, for the port checks (unix sockets are checked by the daemon when it listens). */
function listensOf(plan: StartPlan): Array<{ flag: string; addr: HostPort; text: string; mapping?: boolean }> {
  return [
    ...plan.listens.map((l) => ({ flag: l.flag, addr: { host: l.host, port: l.port }, text: formatHostPort(l.host, l.port) })),
    ...plan.forwards.map((f) => ({ flag: f.flag, addr: f.listen, text: f.text, mapping: true })),
  ];
}

/** Refuses a fixed port another managed proxy or any other program already listens on. */
async function checkPorts(l: StateLayout, listens: Array<{ flag: string; addr: HostPort; text: string; mapping?: boolean }>): Promise<void> {
  // A proxy elsewhere holds its ports on another machine or in another container: bindProblem()
  // finds a clash here.
  const others = inspectAll(l).filter((x) => x.state !== 'dead' && x.state !== 'elsewhere');
  for (const { flag, addr, text, mapping } of listens) {
    if (addr.port === 0) continue;
    const hint = mapping
      ? 'pick another local port, or 0 for a free one'
      : `pick another, e.g. ${flag} ${addr.host.includes(':') ? `[${addr.host}]` : addr.host}:0 (a free port)`;
    const owner = others.find(
      ({ entry }) =>
        [entry.socks, entry.http, ...(entry.forwards ?? []).map((f) => f.address)].some((a) => a?.port === addr.port && sameHost(a.address, addr.host)) ||
        plannedAddresses(entry).some((a) => a.port === addr.port && sameHost(a.host, addr.host)),
    );
    if (owner) {
      throw new StartupError(`${flag} ${text}: the address is taken by managed proxy ${owner.entry.id} (${describeTarget(owner.entry)}); ${hint}`);
    }
    const problem = await bindProblem(addr);
    if (problem) throw new StartupError(`${flag} ${text}: ${problem}; ${hint}`);
  }
}

/**
 * Where a proxy listens by its options: one still starting (two connects racing for one port each
 * found it free), and `localhost`'s ::1, which the addresses recorded (its first listener's) omit.
 */
function plannedAddresses(entry: ProxyEntry): HostPort[] {
  try {
    return tcpAddressesOf(entry.options);
  } catch {
    return []; // its own start refuses these options
  }
}

function sameHost(bound: string, wanted: string): boolean {
  // `localhost` is both loopback addresses (listeners/loopbacks.ts).
  const norm = (h: string) => (h.toLowerCase() === 'localhost' ? ['127.0.0.1', '::1'] : [h.replace(/^::ffff:/, '')]);
  return norm(bound).some((b) => norm(wanted).includes(b)) || bound === '0.0.0.0' || bound === '::' || wanted === '0.0.0.0' || wanted === '::';
}

/** Binds and closes at once, as the daemon will bind (listeners/loopbacks.ts); a short message when that fails. */
async function bindProblem(addr: HostPort): Promise<string | undefined> {
  const refused = await bindRefusal(addr.host, addr.port);
  if (!refused) return undefined;
  const { code, message } = refused.err;
  const why =
    code === 'EADDRINUSE'
      ? 'the address is already in use by another program'
      : code === 'EACCES'
        ? 'permission denied (ports below 1024 need privileges)'
        : `cannot listen there: ${message}`;
  return refused.at ? `${refused.at}: ${why}` : why;
}

/**
 * Starts `<node> <bin> daemon --id ID` (the single executable: `<binary> daemon --id ID`)
 * detached, in its own session, stdio on its log file.
 */
function spawnDaemon(l: StateLayout, id: string): number {
  const self = selfInvocation();
  const logFd = openSync(l.logFile(id), 'a', 0o600);
  try {
    fchmodSync(logFd, 0o600);
    const child = spawn(self.command, [...self.args, 'daemon', '--id', id], {
      ...detachedSpawnOptions(),
      stdio: ['ignore', logFd, logFd],
      // The state dir as resolved here, whatever the daemon's environment would say.
      // Without the credentials variable: the daemon reads them from its private file.
      env: daemonEnv(process.env, { [STATE_DIR_ENV]: l.root, [PROXY_AUTH_ENV]: undefined }),
      // Exec plugins run in the user's working directory, as under kubectl (their command is
      // already absolute: see cluster/kubeconfig.ts resolveExecCommand); a removed one is inherited.
      cwd: workingDirectory(),
    });
    child.on('error', () => undefined);
    if (child.pid === undefined) throw new StartupError(`cannot start the proxy daemon (${[self.command, ...self.args].join(' ')})`);
    child.unref();
    return child.pid;
  } finally {
    closeSync(logFd);
  }
}

/**
 * Polls state.json until the daemon is running. On failure a daemon we started is stopped and
 * its entry removed (the log stays), and its one-line error becomes ours; so on Ctrl-C. `ours`:
 * the createdAt of the entry this connect made; another under the ID since is not ours to stop.
 */
async function waitForReady(l: StateLayout, id: string, ours: string | false, interrupts?: Interrupts): Promise<ProxyEntry> {
  let progress: StartProgress | undefined;
  let problem: string;
  const since = ours ? Date.parse(ours) : Date.now();
  let pid: number | undefined; // the daemon's, for its own lines of a log that later ones of the ID share
  for (;;) {
    if (interrupts?.received) {
      if (ours) await discard(l, id, ours);
      throw new ConnectInterrupted(interrupts.received, ours ? `the proxy it was starting (${id}) is stopped` : `proxy ${id} goes on starting`);
    }
    const entry = readEntry(l, id);
    if (!entry || (ours && entry.createdAt !== ours)) {
      problem = stoppedWhileStarting(l.logFile(id), id, since, pid);
      break;
    }
    if (entry.phase === 'running') return entry;
    pid = entry.pid ?? pid;
    // Asked where the entry says: a daemon another shell started may use another $TMPDIR.
    progress ??= new StartProgress(controlSocketOf(l, entry));
    if (entry.phase === 'stopping') {
      // A disconnect (or the daemon's own stop) got there first; whoever stops it removes it.
      throw new StartupError(stoppedWhileStarting(l.logFile(id), id, since, pid));
    }
    if (entry.phase === 'failed' || entry.phase === 'dead') {
      problem = entry.error ?? `the proxy daemon exited before it was ready; see ${l.logFile(id)}`;
      break;
    }
    if (entry.pid !== undefined && !isAlive(entry.pid)) {
      // It may have written "failed" just before exiting: read once more.
      const last = readEntry(l, id);
      problem = last?.phase === 'failed' && last.error ? last.error : `the proxy daemon exited before it was ready; see ${l.logFile(id)}`;
      break;
    }
    if (await progress.stalled()) {
      problem = `the proxy daemon was not ready and got no further for ${progress.waitMs / 1000} s; see ${l.logFile(id)}`;
      break;
    }
    await sleep(POLL_MS);
  }
  if (ours) await discard(l, id, ours);
  throw new StartupError(problem);
}

async function discard(l: StateLayout, id: string, createdAt: string): Promise<void> {
  await withStateLock(l, () => {
    const entry = readEntry(l, id);
    // Another connect's proxy under the ID since (ours was disconnected while this one was suspended).
    if (entry?.createdAt !== createdAt) return;
    if (entry.pid !== undefined && isOurDaemon(entry.pid, entry.procIdentity, id, systemHost, entry.program)) signal(entry.pid, 'SIGKILL');
    removeEntry(l, id);
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * How the daemon outlives `connect`: its own session (Unix: setsid, so the terminal's SIGHUP and
 * Ctrl-C do not reach it); on Windows its own process group without a console window of its own
 * (`detached` alone would open one).
 */
export function detachedSpawnOptions(platform: NodeJS.Platform = process.platform): { detached: true; windowsHide: boolean } {
  return { detached: true, windowsHide: platform === 'win32' };
}
