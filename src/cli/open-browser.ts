// Opens a URL in the user's browser with the platform's opener (xdg-open, open, start). The URL
// carries a token: it is not put on a command line (other users can read those), but in a
// redirecting HTML file only the user can read (0600 in a 0700 directory), as Jupyter does; the
// opener gets the file's path. Never fails: without an opener (a server, a container) it says so.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

/** Removes the redirect file after this long: the browser has read it by then. */
const KEEP_REDIRECT_MS = 60_000;

function opener(file: string): [string, string[]] {
  if (process.platform === 'darwin') return ['open', [file]];
  if (process.platform === 'win32') return ['cmd', ['/c', 'start', '""', file]];
  return ['xdg-open', [file]];
}

const htmlAttribute = (s: string) => s.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');

/** Resolves with undefined once the opener started, or with why no browser could be opened. */
export async function openBrowser(url: string): Promise<string | undefined> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'proxyout-ui-'));
  const file = path.join(dir, 'open.html');
  writeFileSync(
    file,
    `<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=${htmlAttribute(url)}"><title>kubectl-proxyout</title><a href="${htmlAttribute(url)}">kubectl-proxyout live page</a>\n`,
    { mode: 0o600 },
  );
  const cleanUp = setTimeout(() => rmSync(dir, { recursive: true, force: true }), KEEP_REDIRECT_MS);
  cleanUp.unref();
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  const [command, args] = opener(process.platform === 'win32' ? file : pathToFileURL(file).href);
  return new Promise((resolve) => {
    let child;
    try {
      child = spawn(command, args, { stdio: 'ignore', detached: true });
    } catch (err) {
      return resolve(`${command}: ${(err as Error).message}`);
    }
    child.once('error', (err) => resolve(`${command}: ${err.message}`));
    child.once('spawn', () => {
      child.unref();
      resolve(undefined);
    });
  });
}
