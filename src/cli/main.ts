// Process entry (bin/kubectl-proxyout imports this). Owns argv routing and error printing so
// that expected failures are one `Error: …` line on stderr, never a stack trace.
import { Errors, flush, handle, run, type Interfaces } from '@oclif/core';
import { routeArgv } from './argv.js';

/** Exit code for usage errors (bad flag, unknown command), as oclif and most CLIs use. */
const USAGE_EXIT = 2;

/** `load` defaults to this package (package.json, manifest, command files); the bundle passes its own. */
export async function main(argv: readonly string[] = process.argv.slice(2), load?: Interfaces.LoadOptions): Promise<void> {
  // Before oclif: `__complete` is no command of ours to list or to ask --help of.
  if (argv[0] === '__complete') {
    const { runCompletion } = await import('./complete-run.js');
    return runCompletion(argv.slice(1), load ?? import.meta.url);
  }
  try {
    await run(routeArgv(argv), load ?? import.meta.url);
    await flush();
  } catch (err) {
    await flush().catch(() => undefined);
    await exitFor(err);
  }
}

async function exitFor(err: unknown): Promise<never> {
  if (err instanceof Errors.ExitError) process.exit(err.oclif.exit ?? 0);
  if (isOclifError(err)) {
    // oclif's own rendering indents, wraps and appends "See more help with --help" lines.
    // DEBUG (oclif's own switch) still gets the stack, for bug reports.
    process.stderr.write(process.env.DEBUG ? `${err.stack}\n` : `Error: ${oneLine(err.message)}\n`);
    process.exit(err.oclif.exit ?? USAGE_EXIT);
  }
  // Not a user error: oclif prints it as it always does (with the stack under DEBUG=*).
  await handle(err as Error);
  process.exit(1);
}

/** CLIError and the parser's errors carry `oclif.exit`; anything else is unexpected. */
function isOclifError(err: unknown): err is Error & { oclif: { exit?: number } } {
  return err instanceof Error && typeof (err as { oclif?: unknown }).oclif === 'object';
}

function oneLine(message: string): string {
  return message
    .replace(/^Parsing (--\S+)\s*\n\s*/, '$1: ')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !/^See more help with/i.test(line))
    .join(' ');
}
