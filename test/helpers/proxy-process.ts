import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { DEFAULTS } from '../../src/proxy/options.js';
import type { TransportMode } from '../../src/tunnel/negotiate.js';
import { duplicateKeys } from './log-lines.js';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const binPath = path.join(repoRoot, 'bin', 'kubectl-proxyout');

export interface ProxyProcess {
  proc: ChildProcess;
  /** "127.0.0.1:PORT" of the SOCKS listener, if on. */
  socks?: string;
  http?: string;
  stdout: string[];
  /** Parsed JSON log lines from stderr. */
  logs: Array<Record<string, unknown>>;
  stderr: () => string;
  /** SIGTERM and wait for exit; resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** The transport the proxies of this test process use unless a test names one. */
export function testTransport(): TransportMode {
  return (process.env.PROXYOUT_TEST_TRANSPORT as TransportMode | undefined) ?? DEFAULTS.transport;
}

/** Runs the real CLI (bin/kubectl-proxyout) and waits until it prints its ready lines. */
export async function startProxyProcess(
  args: string[],
  opts: {
    env?: NodeJS.ProcessEnv;
    timeoutMs?: number;
    command?: string[];
    cwd?: string;
    /** Called with the process as soon as it is spawned, to signal it before it is ready. */
    onSpawn?: (proc: ChildProcess) => void;
  } = {},
): Promise<ProxyProcess> {
  const command = opts.command ?? [process.execPath, binPath];
  // Test files run two at a time: a proxy on the default 127.0.0.1:1080 collides with another's.
  if (!opts.command && !args.includes('--listen-socks'))
    throw new Error('startProxyProcess: give --listen-socks (127.0.0.1:0, a unix socket or off), not the default port');
  // PROXYOUT_TEST_TRANSPORT runs a suite under another transport (npm test runs the fault suite under each).
  const forced = process.env.PROXYOUT_TEST_TRANSPORT;
  if (forced && !args.includes('--transport') && command[command.length - 1] === binPath) args = [...args, '--transport', forced];
  const proc = spawn(command[0], [...command.slice(1), ...args], { env: { ...process.env, ...opts.env }, stdio: ['ignore', 'pipe', 'pipe'], cwd: opts.cwd });
  opts.onSpawn?.(proc);
  const stdout: string[] = [];
  const logs: Array<Record<string, unknown>> = [];
  const twiceKeyed: string[] = [];
  let stderrText = '';
  let exited = false;
  const exit = once(proc, 'exit').then(([code]) => {
    exited = true;
    return code as number | null;
  });
  proc.stderr!.setEncoding('utf8');
  let partial = '';
  proc.stderr!.on('data', (chunk: string) => {
    stderrText += chunk;
    partial += chunk;
    const lines = partial.split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) {
      try {
        logs.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        continue; // not a log line
      }
      if (duplicateKeys(line).length > 0) twiceKeyed.push(line);
    }
  });
  const result: ProxyProcess = {
    proc,
    stdout,
    logs,
    stderr: () => stderrText,
    async stop(signal = 'SIGTERM') {
      if (!exited) proc.kill(signal);
      const code = await exit;
      // Every test that stops a proxy also checks that no log line had a key twice (log-lines.ts),
      // and that Node wrote no warning of its own among the log lines (core/process-warnings.ts).
      assert.deepEqual(twiceKeyed, [], 'log lines with a key written twice');
      assert.deepEqual(
        stderrText.split('\n').filter((l) => /^\(node:\d+\) /.test(l)),
        [],
        "Node's own warning lines on stderr",
      );
      return code;
    },
  };
  proc.stdout!.setEncoding('utf8');
  let outPartial = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`proxy did not become ready: ${stderrText}`)), opts.timeoutMs ?? 30_000);
    proc.stdout!.on('data', (chunk: string) => {
      outPartial += chunk;
      const lines = outPartial.split('\n');
      outPartial = lines.pop() ?? '';
      for (const line of lines) {
        stdout.push(line);
        const socks = /^export ALL_PROXY='?socks5h:\/\/([^']+)'?$/.exec(line);
        if (socks) result.socks = socks[1];
        const http = /^export HTTP_PROXY='?http:\/\/([^']+)'?$/.exec(line);
        if (http) result.http = http[1];
      }
      // An HTTP listener on a unix socket prints no HTTP_PROXY line (no variable can name one).
      const httpAt = args.indexOf('--listen-http');
      const wantHttp = httpAt >= 0 && args[httpAt + 1] !== 'off' && !args[httpAt + 1]?.startsWith('unix:');
      const wantSocks = !args.some((a, i) => a === '--listen-socks' && args[i + 1] === 'off');
      if ((!wantSocks || result.socks) && (!wantHttp || result.http)) {
        clearTimeout(timer);
        resolve();
      }
    });
    void exit.then((code) => {
      clearTimeout(timer);
      reject(new Error(`proxy exited with ${code} before ready: ${stderrText}`));
    });
  });
  return result;
}

/** Runs the CLI to completion (for commands that are expected to exit). */
export async function runCli(
  args: string[],
  opts: {
    env?: NodeJS.ProcessEnv;
    timeoutMs?: number;
    cwd?: string;
    /** Written to a piped stdin, then closed. */ input?: string;
    /** A command that runs the CLI (e.g. nsenter … --), its program first. */ via?: string[];
    /** Told what stderr has so far, each time more comes. */ onStderr?: (stderr: string) => void;
    /** Given the CLI's process once it runs (to signal it). */ onSpawn?: (proc: ChildProcess) => void;
  } = {},
): Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }> {
  const [file, ...before] = [...(opts.via ?? []), process.execPath];
  const proc = spawn(file!, [...before, binPath, ...args], {
    env: { ...process.env, ...opts.env },
    stdio: [opts.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    cwd: opts.cwd,
  });
  opts.onSpawn?.(proc);
  if (opts.input !== undefined) proc.stdin!.end(opts.input);
  let stdout = '';
  let stderr = '';
  proc.stdout!.setEncoding('utf8').on('data', (c: string) => (stdout += c));
  proc.stderr!.setEncoding('utf8').on('data', (c: string) => {
    stderr += c;
    opts.onStderr?.(stderr);
  });
  const timer = setTimeout(() => proc.kill('SIGKILL'), opts.timeoutMs ?? 30_000);
  const [code, signal] = (await once(proc, 'exit')) as [number | null, NodeJS.Signals | null];
  clearTimeout(timer);
  return { code, signal, stdout, stderr };
}
