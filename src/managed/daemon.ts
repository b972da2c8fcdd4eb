// The managed proxy's own process (`kubectl-proxyout daemon --id ID`, started by `connect`,
// detached in its own session with stdio on its log file). Its life:
//   read proxies/<id>/state.json → startProxy() from the transient kubeconfig → control socket
//   → state "running" (pid, start identity, addresses) → … → SIGTERM / control "stop"
//   → state "stopping" → drain (RunningProxy.stop(grace)) → remove proxies/<id>/ → exit 0.
// A startup failure is written to state.json (phase "failed", the one-line error) for `connect`
// to print; the kubeconfig is removed on every way out. The log rotates by size
// (managed/rotating-log.ts); SIGHUP reopens it (logrotate).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { RoutingTable } from '../routing/table-spec.js';
import { StartupError, errorMessage } from '../core/errors.js';
import { createLogger, LOG_LEVELS, type LogLevel, type Logger } from '../core/log.js';
import { logProcessWarnings } from '../core/process-warnings.js';
import { userKubeconfigSource } from './reload.js';
import { startProxy, type Listening } from '../proxy/proxy.js';
import { noStreams } from '../listeners/stream-stats.js';
import { startGcGuard } from '../core/gc-guard.js';
import { formatAddress } from '../listeners/bound-address.js';
import { checkParent } from '../listeners/unix-socket.js';
import type { RunningProxy } from '../proxy/running.js';
import { ensureStateDir, isNamedPipe, layout, validateId, type StateLayout } from '../state/paths.js';
import { withStateLock } from '../state/lock.js';
import { controlSocketOf, readEntry, removeEntry, removeTransient, updateEntry, type ListenAddress, type ProxyEntry } from './store.js';
import { processIdentity } from '../state/process.js';
import { workingDirectory } from '../core/self.js';
import { startControlServer, type ControlHandlers, type ControlServer, type LiveStatus } from './control.js';
import { keepControlServer, type KeptControl } from './control-keeper.js';
import { entryOwnership, watchOwnEntry } from './entry-watch.js';
import type { CacheStatus } from '../cluster/cache.js';
import { takeProxyAuthFile } from '../state/proxy-auth.js';
import { RotatingLogFile } from './rotating-log.js';
import { routeKubeconfigsFor } from './table.js';
import { CONTROL_CLOSE_MS, settlesBy, shutdownPlan, type ShutdownPlan } from './stop-budget.js';

export async function runDaemon(id: string): Promise<number> {
  // Everything this process creates (socket, log, state) is for this user only.
  process.umask(0o077);
  validateId(id);
  const l = ensureStateDir(layout());
  const entry = readEntry(l, id);
  if (!entry) {
    process.stderr.write(`kubectl-proxyout daemon: no state for ${id} in ${l.proxiesDir}\n`);
    return 1;
  }
  const level: LogLevel = (LOG_LEVELS as readonly string[]).includes(entry.options.logLevel) ? (entry.options.logLevel as LogLevel) : 'info';
  const dest = new RotatingLogFile(l.logFile(id));
  const log = createLogger(level, dest).child({ id });
  logProcessWarnings(log);
  // Bulk transfers can make V8 mark the whole heap every few dozen ms (core/gc-guard.ts).
  const gcGuard = startGcGuard(log);
  try {
    return await new Daemon(l, entry, log, dest).run();
  } finally {
    gcGuard?.stop();
  }
}

class Daemon {
  private running?: RunningProxy;
  /** While startProxy runs: the cache's status (its first sync's progress). */
  private startingCache?: () => CacheStatus | undefined;
  /** Where the listeners are bound, from before the first sync ends (status shows them while starting). */
  private boundAt?: Listening;
  private control?: KeptControl;
  private readonly startedAt = Date.now();
  private stopRequested!: (reason: string) => void;
  /** The first stop's deadlines (stop-budget.ts), from when it was seen. */
  private plan?: ShutdownPlan;
  private readonly stopSignal = new Promise<string>(
    (resolve) =>
      (this.stopRequested = (reason) => {
        this.plan ??= shutdownPlan(this.entry.options.shutdownGraceMs, Date.now());
        resolve(reason);
      }),
  );
  private stopping = false;
  private unwatch?: () => void;

  constructor(
    private readonly l: StateLayout,
    private readonly entry: ProxyEntry,
    private readonly log: Logger,
    private readonly dest: RotatingLogFile,
  ) {}

  async run(): Promise<number> {
    const { id, context, namespace, server, options } = this.entry;
    this.installHandlers();
    // Its entry removed (or taken by another connect) while it runs: nothing can manage it, it goes.
    this.unwatch = watchOwnEntry(this.l, id, this.entry.createdAt, (how) => {
      this.log.warn({ stateFile: this.l.stateFile(id) }, `the state entry was ${how === 'gone' ? 'removed' : 'replaced by another proxy'}; stopping`);
      this.stopRequested(how === 'gone' ? 'state entry removed' : 'state entry replaced');
    });
    this.log.info(
      {
        context,
        namespace,
        server,
        listenSocks: options.listenSocks,
        listenHttp: options.listenHttp,
        forwards: options.forwards,
        cwd: workingDirectory() ?? '(removed)',
      },
      'daemon starting',
    );
    try {
      const proxyAuth = takeProxyAuthFile(this.l, id);
      // The control socket answers from the start, so `status` shows a long first sync's progress.
      // One too long for the proxy directory is in the temporary socket directory: checked as any.
      const controlSocket = controlSocketOf(this.l, this.entry);
      if (!isNamedPipe(controlSocket) && path.dirname(controlSocket) !== this.l.proxyDir(id)) checkParent(controlSocket, 'the control socket');
      const handlers: ControlHandlers = {
        status: () => this.liveStatus(),
        stop: () => this.stopRequested('control request'),
        reload: (request) => this.reload(request.createdAt),
        pac: () => {
          if (!this.running) throw new Error('the proxy is still starting; try again in a moment');
          return this.running.pac();
        },
        watch: (subscriber) => {
          if (!this.running) throw new Error('the proxy is still starting; try again in a moment');
          return this.running.watch(subscriber);
        },
      };
      const control = await startControlServer(controlSocket, handlers);
      this.control = isNamedPipe(controlSocket) ? control : this.keepControl(control, controlSocket, handlers);
      const callOff = new AbortController();
      const starting = startProxy(
        {
          ...options,
          logLevel: this.log.level as LogLevel,
          kubeconfig: this.l.kubeconfigFile(id),
          context,
          namespace,
          proxyAuth,
          // The table `connect` resolved (the daemon reads the user's kubeconfig only to see whether
          // refused credentials were renewed there: reload.ts userKubeconfigSource).
          config: undefined,
          contexts: undefined,
          routeKubeconfigs: options.table ? routeKubeconfigsFor(this.l, id, options.table) : undefined,
          // connect checked a lone cluster's API server with these credentials just before starting us.
          apiChecked: (options.table?.routes.length ?? 1) === 1,
        },
        this.log,
        {
          cacheStarting: (status) => (this.startingCache = status),
          bound: (at) => (this.boundAt = at),
          signal: callOff.signal,
          credentials: (running) => userKubeconfigSource(this.l, id, options.kubeconfigSource, () => running.table()),
        },
      );
      // A stop asked for during the first sync (disconnect, quit, a signal) ends the start: nothing
      // is served yet. Waiting for the sync instead made every such stop end in SIGKILL after the
      // grace. What startProxy bound is closed first, before our entry goes: a `connect` waiting
      // for that may bind the same ports at once.
      const stoppedEarly = await Promise.race([starting.then(() => undefined), this.stopSignal]);
      if (stoppedEarly !== undefined) {
        callOff.abort();
        // Started after all (in the same turn): then it is drained like any.
        const settled = starting.catch(() => undefined);
        if (await settlesBy(this.plan!.drainUntil, settled)) this.running = await settled;
        return await this.shutdown(`${stoppedEarly} while starting`);
      }
      this.running = await starting;
    } catch (err) {
      const message = err instanceof StartupError ? err.message : `unexpected startup failure: ${errorMessage(err)}`;
      this.log.error({ error: message }, 'daemon failed to start');
      await this.running?.stop(0).catch(() => undefined);
      await this.control?.closeWithin(CONTROL_CLOSE_MS);
      await withStateLock(this.l, () => {
        if (entryOwnership(this.l, id, this.entry.createdAt) === 'replaced') return;
        removeTransient(this.l, id);
        updateEntry(this.l, id, (e) => {
          e.phase = 'failed';
          e.error = message;
        });
      }).catch(() => this.removeOwnTransient());
      await this.flush();
      return 1;
    }

    // Never over another proxy's entry (a connect that took the ID meanwhile): undefined, not wanted.
    const recording = withStateLock(this.l, () =>
      !this.ownEntry(true)
        ? undefined
        : updateEntry(this.l, id, (e) => {
            // A disconnect that got here first (it records 'stopping' before its SIGTERM) stays seen, and
            // so does a stop this daemon saw while it waited for the lock: `connect` must not read "running".
            e.phase = e.phase === 'stopping' || this.plan !== undefined ? 'stopping' : 'running';
            e.pid = process.pid;
            e.procIdentity = processIdentity(process.pid) ?? e.procIdentity;
            e.startedAt = new Date().toISOString();
            e.socks = addressOf(this.running!.socks);
            e.http = addressOf(this.running!.http);
            const forwards = this.running!.forwards ?? [];
            if (forwards.length > 0) e.forwards = forwards.map((f) => ({ address: addressOf(f.address)!, target: f.target }));
            delete e.error;
          }),
    );
    // A stop while another command holds the lock is not kept waiting for it: the stop's plan
    // (stop-budget.ts) runs from the moment it is seen, and the listeners get their whole grace.
    // The record, if it comes later, keeps a "stopping" the shutdown wrote, or finds no entry.
    const recorded = await Promise.race([
      recording.then(
        (stillWanted) => ({ stillWanted }),
        (err: unknown) => ({ failed: errorMessage(err) }),
      ),
      this.stopSignal.then((reason) => ({ reason })),
    ]);
    if ('reason' in recorded) {
      recording.catch(() => undefined);
      return this.shutdown(recorded.reason);
    }
    if ('failed' in recorded) {
      this.log.error({ error: recorded.failed }, 'could not record the daemon as running; stopping');
      return this.shutdown('its state could not be recorded');
    }
    // Gone while we started (`disconnect`/`quit` removed our entry, or another took it): do not linger.
    if (!recorded.stillWanted) this.stopRequested('state entry removed while starting');
    const { socks, http } = this.running;
    this.log.info({ socks: socks && formatAddress(socks), http: http && formatAddress(http) }, 'daemon ready');

    const reason = await this.stopSignal;
    return this.shutdown(reason);
  }

  /**
   * Drain and go, within the plan the stop was seen with: whoever stopped us kills us after
   * stop-budget.ts termWaitMs, and we are to be gone by then without holding the state lock.
   */
  private async shutdown(reason: string): Promise<number> {
    const { id, options } = this.entry;
    const plan = (this.plan ??= shutdownPlan(options.shutdownGraceMs, Date.now()));
    this.stopping = true;
    this.log.info({ reason, graceMs: options.shutdownGraceMs }, 'daemon stopping');
    // Recorded while the drain runs (disconnect has recorded it already); not worth waiting past it.
    this.unwatch?.();
    // Never on another proxy's entry: a connect may have taken the ID meanwhile.
    const recorded = this.underLock(plan.drainUntil, 'record "stopping"', () => this.ownEntry() && updateEntry(this.l, id, (e) => (e.phase = 'stopping')));
    if (!(await settlesBy(plan.drainUntil, this.running?.stop(options.shutdownGraceMs))))
      this.log.warn('the drain did not end in time; what is left is cut off');
    await recorded;
    await this.control?.closeWithin(CONTROL_CLOSE_MS);
    const removed = await this.underLock(plan.lockUntil, 'remove the entry', () => {
      // Remove only our own entry: a new `connect` may have replaced it meanwhile.
      const current = readEntry(this.l, id);
      if (!current || current.createdAt === this.entry.createdAt) removeEntry(this.l, id);
    });
    // The credentials go in any case; the entry then goes with the stopper (or as dead).
    if (!removed) this.removeOwnTransient();
    this.log.info('daemon exited');
    await this.flush();
    return 0;
  }

  /** The control socket listened on again when its file is removed (managed/control-keeper.ts). */
  private keepControl(first: ControlServer, socket: string, handlers: ControlHandlers): KeptControl {
    let warned = false;
    return keepControlServer(first, socket, handlers, {
      stillOurs: () => !this.stopping && this.ownEntry(),
      prepare: () => {
        if (path.dirname(socket) !== this.l.proxyDir(this.entry.id)) checkParent(socket, 'the control socket');
      },
      relistened: (err) => {
        if (!err) return void ((warned = false), this.log.warn({ socket }, 'the control socket was removed; listening on it again'));
        if (!warned) this.log.warn({ socket, error: errorMessage(err) }, 'the control socket was removed and cannot be made again');
        warned = true;
      },
    });
  }

  /** Our entry is still there and ours (not removed, not replaced by another connect's); `unknown`: if unreadable. */
  private ownEntry(unknown = false): boolean {
    const now = entryOwnership(this.l, this.entry.id, this.entry.createdAt);
    return now === 'ours' || (now === 'unknown' && unknown);
  }

  /** The credentials and socket go, unless they are another proxy's that took our ID meanwhile. */
  private removeOwnTransient(): void {
    if (entryOwnership(this.l, this.entry.id, this.entry.createdAt) !== 'replaced') removeTransient(this.l, this.entry.id);
  }

  /** fn under the state lock, unless it cannot be had by `until`: then false, and a warning. */
  private async underLock(until: number, what: string, fn: () => unknown): Promise<boolean> {
    try {
      await withStateLock(this.l, fn, { until });
      return true;
    } catch (err) {
      this.log.warn({ error: errorMessage(err) }, `could not ${what} under the state lock in time; going on without`);
      return false;
    }
  }

  /** `reload ID` left a new table (and its kubeconfigs) in our directory: take it, or say why not. */
  private async reload(createdAt: string | undefined): Promise<void> {
    const { id } = this.entry;
    // Made for the entry of another daemon under our ID (one we replaced after reload looked).
    if (createdAt !== undefined && createdAt !== this.entry.createdAt)
      throw new Error(`this is another proxy under the ID ${id}, connected since reload looked; nothing was reloaded: run reload again`);
    let table: RoutingTable;
    try {
      table = JSON.parse(readFileSync(this.l.tableFile(id), 'utf8')) as RoutingTable;
    } catch (err) {
      throw new Error(`cannot read the new routing table: ${errorMessage(err)}`);
    }
    if (!this.running) throw new Error('the proxy is still starting');
    if (this.stopping) throw new Error('the proxy is stopping');
    const reloading = this.running.reload({ table, routeKubeconfigs: routeKubeconfigsFor(this.l, id, table) });
    reloading.catch((err: unknown) => this.log.error({ error: errorMessage(err) }, 'reload failed; the routing table is unchanged'));
    // A stop answers a reload still checking its routes (up to 35 s for their sync) at once: waiting
    // for it held the control socket open, and the daemon past its stopper's kill.
    const stopped = this.stopSignal.then(() => {
      throw new Error('the proxy is stopping; nothing was reloaded');
    });
    stopped.catch(() => undefined);
    await Promise.race([reloading, stopped]);
    if (this.stopping) return; // its entry goes anyway
    // The mappings stay those it listens on (a reload keeps its listeners): the next reload
    // compares the file with these (managed/reload.ts).
    const { forwards: _fileForwards, ...routes } = table;
    await withStateLock(this.l, () =>
      updateEntry(this.l, id, (e) => (e.options.table = e.options.table?.forwards ? { ...routes, forwards: e.options.table.forwards } : routes)),
    );
  }

  private liveStatus(): LiveStatus {
    if (!this.running) {
      return {
        pid: process.pid,
        phase: 'starting',
        uptimeMs: Date.now() - this.startedAt,
        totals: noStreams(),
        cache: this.startingCache?.(),
        ...(this.boundAt
          ? {
              listening: {
                socks: addressOf(this.boundAt.socks),
                http: addressOf(this.boundAt.http),
                forwards: (this.boundAt.forwards ?? []).map((f) => ({ address: addressOf(f.address)!, target: f.target })),
              },
            }
          : {}),
      };
    }
    return {
      pid: process.pid,
      phase: this.stopping ? 'stopping' : 'running',
      uptimeMs: Date.now() - this.startedAt,
      totals: this.running.totals(),
      routes: this.running.routes(),
      cache: this.running.cacheStatus?.(),
      transports: this.running.transports?.(),
      ...(this.running.warnings?.length ? { warnings: this.running.warnings } : {}),
    };
  }

  private installHandlers(): void {
    let signals = 0;
    const onSignal = (signal: NodeJS.Signals) => {
      signals++;
      if (signals === 1) return this.stopRequested(signal);
      // A second signal: stop now, but still take the credentials away.
      this.log.warn({ signal }, 'second signal: exiting without draining');
      this.removeOwnTransient();
      this.flushSync();
      process.exit(143);
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
    process.on('SIGHUP', () => {
      this.dest.reopen();
      this.log.info('log file reopened (SIGHUP)');
    });
    const fatal = (err: unknown) => {
      this.log.fatal({ error: errorMessage(err), stack: err instanceof Error ? err.stack : undefined }, 'daemon crashed');
      this.removeOwnTransient();
      this.flushSync();
      process.exit(1);
    };
    process.on('uncaughtException', fatal);
    process.on('unhandledRejection', fatal);
  }

  private flush(): Promise<void> {
    return new Promise<void>((resolve) => this.log.flush(() => resolve()));
  }

  private flushSync(): void {
    try {
      this.dest.flushSync();
    } catch {
      /* nothing more we can do */
    }
  }
}

function addressOf(a: { address: string; port: number; family: string } | undefined): ListenAddress | undefined {
  return a ? { address: a.address, port: a.port, family: a.family } : undefined;
}
