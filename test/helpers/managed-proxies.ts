// Managed proxies for the tests (a daemon connected for some contexts: HTTP and SOCKS on free
// loopback ports, no credentials), and `kubectl proxyout ui` started headless with the URL it prints.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { binPath, runCli } from './proxy-process.js';

export interface Connected {
  id: string;
  http: string;
  socks: string;
}

/** `connect --json` of a daemon for these contexts (the kubeconfig's current one when none), HTTP and SOCKS on free loopback ports, no credentials. */
export async function connectManaged(stateDir: string, kubeconfig: string, contexts: string[] = []): Promise<Connected> {
  const r = await runCli(
    [
      'connect',
      '--kubeconfig',
      kubeconfig,
      ...contexts.flatMap((c) => ['--context', c]),
      '--listen-socks',
      '127.0.0.1:0',
      '--listen-http',
      '127.0.0.1:0',
      '--no-proxy-auth',
      '--shutdown-grace',
      '0',
      '--json',
    ],
    { env: { KUBECTL_PROXYOUT_STATE_DIR: stateDir }, timeoutMs: 60_000 },
  );
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout) as Connected;
}

export function managedCli(stateDir: string) {
  const env = { KUBECTL_PROXYOUT_STATE_DIR: stateDir };
  return {
    env,
    cli: (args: string[]) => runCli(args, { env, timeoutMs: 60_000 }),
    connect: (kubeconfig: string, context: string) => connectManaged(stateDir, kubeconfig, [context]),
  };
}

export interface UiCommand {
  process: ChildProcess;
  url: URL;
  /** SIGTERM, and its exit code. */
  stop(): Promise<number | null>;
}

/** `ui --no-open` (or `ui`, with `open`) with this state directory, once it printed its URL. */
export async function startUi(env: Record<string, string>, open = false): Promise<UiCommand> {
  const ui = spawn(process.execPath, [binPath, 'ui', ...(open ? [] : ['--no-open'])], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  ui.stdout.setEncoding('utf8');
  const url = await new Promise<URL>((resolve, reject) => {
    ui.stdout.on('data', (c: string) => {
      out += c;
      const m = /^kubectl-proxyout: live page at (http:\/\/127\.0\.0\.1:\d+\/\?token=[\w-]+) /m.exec(out);
      if (m) resolve(new URL(m[1]!));
    });
    ui.once('exit', (code) => reject(new Error(`ui exited with ${code}: ${out}`)));
  });
  return {
    process: ui,
    url,
    async stop() {
      if (ui.exitCode !== null) return ui.exitCode;
      ui.kill('SIGTERM');
      const [code] = (await once(ui, 'exit')) as [number | null];
      return code;
    },
  };
}
