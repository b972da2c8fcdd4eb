// Process entry (bin/kubectl-proxyout imports this). Owns argv routing and error printing so
// that expected failures are one `Error: …` line on stderr, never a stack trace.
import { Config, Errors, flush, handle, run, type Interfaces } from '@oclif/core';
import { fileURLToPath } from 'node:url';
import { routeArgv } from './argv.js';
import { DISPLAY_BIN } from './help.js';
import { answerUserInfoWithoutPasswd } from './passwd-less.js';
import { editDistance } from '../core/edit-distance.js';
import { escapeControls, escapeControlsKeepingLines } from '../core/escape.js';
import { noteTerminalStdio, releaseHungUpStdio } from '../core/terminal.js';

/** Exit code for usage errors (bad flag, unknown command), as oclif and most CLIs use. */
const USAGE_EXIT = 2;

/** `load` defaults to this package (package.json, manifest, command files); the bundle passes its own. */
export async function main(argv: readonly string[] = process.argv.slice(2), given?: string | Interfaces.Options): Promise<void> {
  if (process.platform !== 'win32') answerUserInfoWithoutPasswd();
  const load = withoutUserPlugins(given ?? import.meta.url);
  // Before oclif: `__complete` is no command of ours to list or to ask --help of.
  if (argv[0] === '__complete') {
    const { runCompletion } = await import('./complete-run.js');
    return runCompletion(argv.slice(1), load);
  }
  // A terminal that hangs up while a command runs must not make its exit abort (core/terminal.ts).
  noteTerminalStdio();
  process.once('exit', releaseHungUpStdio);
  let config: Config | undefined;
  try {
    config = await Config.load(load);
    await run(routeArgv(argv, config.findCommand('exec')?.flags), config);
    await flushUnlessHungUp();
  } catch (err) {
    await flushUnlessHungUp().catch(() => undefined);
    await exitFor(err, config, argv[0]);
  }
}

/** oclif's flush writes to stdout: on a terminal that has hung up that is EIO, which oclif throws. */
async function flushUnlessHungUp(): Promise<void> {
  if (!releaseHungUpStdio().includes(1)) await flush();
}

/**
 * No oclif user plugins (there is no `plugins install`): oclif reads their package.json in the
 * data directory at every start, and a home this user cannot read (a container's image HOME under
 * another UID) put a Node warning, EACCES and all, before every command's output.
 */
function withoutUserPlugins(load: string | Interfaces.Options): Interfaces.Options {
  if (typeof load === 'object') return { ...load, userPlugins: false };
  return { root: load.startsWith('file:') ? fileURLToPath(load) : load, userPlugins: false };
}

async function exitFor(err: unknown, config: Config | undefined, first?: string): Promise<never> {
  if (err instanceof Errors.ExitError) process.exit(err.oclif.exit ?? 0);
  if (isOclifError(err)) {
    // oclif's own rendering indents, wraps and appends "See more help with --help" lines.
    // DEBUG (oclif's own switch) still gets the stack, for bug reports. Messages quote names and
    // API server text (a kubeconfig's context, a Status message): their controls are escaped.
    process.stderr.write(
      process.env.DEBUG ? `${escapeControlsKeepingLines(err.stack ?? '')}\n` : `Error: ${escapeControls(notFound(oneLine(err.message), config, first))}\n`,
    );
    process.exit(err.oclif.exit ?? USAGE_EXIT);
  }
  // Not a user error: oclif prints it as it always does (with the stack under DEBUG=*).
  // Own properties: a DOMException's message is a getter, which an assignment would throw on.
  if (err instanceof Error) {
    for (const key of ['message', 'stack'] as const) {
      const text = err[key];
      if (text) Object.defineProperty(err, key, { value: escapeControlsKeepingLines(text), writable: true, configurable: true });
    }
  }
  await handle(err as Error);
  process.exit(1);
}

/** CLIError and the parser's errors carry `oclif.exit`; anything else is unexpected. */
function isOclifError(err: unknown): err is Error & { oclif: { exit?: number } } {
  return err instanceof Error && typeof (err as { oclif?: unknown }).oclif === 'object';
}

/**
 * oclif reads the words after a command that takes no arguments as more of its name
 * (`quit extra` → "command quit:extra not found"): say which word is one too many instead.
 */
function notFound(message: string, config: Config | undefined, first?: string): string {
  const id = /^command (\S+) not found$/.exec(message)?.[1];
  if (id === undefined) return message;
  const destination = first === undefined || config?.findCommand(first) ? undefined : destinationHint(first);
  if (destination) return destination;
  const [command, extra] = id.split(':') as [string, string | undefined];
  if (!config?.findCommand(command)) return `command ${command} not found${nearest(command, config)}`;
  if (extra === undefined) return message;
  return `Unexpected argument: ${extra} (${DISPLAY_BIN} ${command} takes none; see ${DISPLAY_BIN} ${command} --help)`;
}

/** What a mistyped command (`conect`, `version`) was likely meant to be, and where the list is. */
function nearest(word: string, config: Config | undefined): string {
  const see = `see ${DISPLAY_BIN} --help`;
  if (word === 'version') return ` (the version: ${DISPLAY_BIN} --version; ${see})`;
  const ids = (config?.commands ?? []).filter((c) => !c.hidden).map((c) => c.id);
  const close = ids.find((c) => editDistance(word, c) <= Math.min(2, c.length >> 2));
  return close ? `: did you mean ${close}? (${see})` : ` (${see})`;
}

/**
 * A destination typed where a command goes (`kubectl proxyout web.shop`, a URL, host:port): the
 * proxy takes none, so say how a client reaches it instead; a loopback host:port is likely
 * meant as the listen address. Undefined for a word that looks like no host (a mistyped command).
 */
export function destinationHint(word: string): string | undefined {
  let host: string;
  let url: string;
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(word)) {
    try {
      host = new URL(word).hostname;
    } catch {
      return undefined;
    }
    url = word;
  } else {
    const m = /^(\[[0-9a-f:.]+\]|[a-z0-9_.-]*)(?::(\d{1,5}))?$/i.exec(word);
    if (!m || (!m[1]!.includes('.') && !m[1]!.startsWith('[') && m[2] === undefined)) return undefined;
    host = m[1]!;
    url = `http://${word}/`;
  }
  if (host === '' || /^(localhost|127(\.\d+){3}|0\.0\.0\.0|\[::1?\])$/i.test(host)) {
    const port = /:(\d{1,5})\/?$/.exec(word)?.[1];
    if (port !== undefined)
      return `${word} is not a command: to listen there, ${DISPLAY_BIN} --listen-socks ${host || '127.0.0.1'}:${port} (see ${DISPLAY_BIN} --help)`;
  }
  return (
    `${word} is not a command: ${DISPLAY_BIN} takes no destination. Start the proxy (${DISPLAY_BIN}) and point a client at it: ` +
    `curl --proxy socks5h://127.0.0.1:1080 ${url} — or run one command through it: ${DISPLAY_BIN} exec -- curl ${url}`
  );
}

function oneLine(message: string): string {
  return (
    message
      .replace(/^Parsing (--\S+)\s*\n\s*/, '$1: ')
      // oclif's preamble to flag conflicts ("--a cannot also be provided when using --b") says nothing.
      .replace(/^The following errors? occurred:\s*/, '')
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line !== '' && !/^See more help with/i.test(line))
      .join(' ')
  );
}
