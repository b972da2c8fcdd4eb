// Real Chromium, headless, for the tests that check what a browser does with our PAC file.
import { execFile, execFileSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

/** The flags every headless Chromium of the tests runs with (no sandbox as root, nothing fetched from outside). */
export const CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export function findChromium(): string | undefined {
  try {
    return (
      execFileSync('sh', ['-c', 'command -v chromium || command -v chromium-browser || command -v google-chrome'], { encoding: 'utf8' }).trim() || undefined
    );
  } catch {
    return undefined;
  }
}

export interface Browser {
  /** The DOM Chromium ends up with for url, loaded with these flags (a proxy flag, resolver rules). */
  dump(url: string, flags: string[]): Promise<string>;
  close(): Promise<void>;
}

/** A headless Chromium with a profile of its own, or undefined when none is installed. */
export async function headlessChromium(): Promise<Browser | undefined> {
  const chromium = findChromium();
  if (!chromium) return undefined;
  const profile = await mkdtemp(path.join(os.tmpdir(), 'proxyout-chromium-'));
  return {
    dump: (url, flags) =>
      new Promise<string>((resolve, reject) => {
        execFile(
          chromium,
          [
            ...CHROMIUM_FLAGS,
            // Without this Chromium never asks the PAC about loopback hosts (implicit bypass).
            '--proxy-bypass-list=<-loopback>',
            `--user-data-dir=${profile}`,
            ...flags,
            '--dump-dom',
            url,
          ],
          { encoding: 'utf8', timeout: 60_000 },
          (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout)),
        );
      }),
    close: () => rm(profile, { recursive: true, force: true }),
  };
}

/** The system Chromium driven by playwright-core (for pages that run script), or why there is none. */
export async function playwrightChromium(): Promise<import('playwright-core').Browser | string> {
  const executablePath = findChromium();
  if (!executablePath) return 'no chromium installed (apt-get install chromium)';
  const { chromium } = await import('playwright-core');
  return chromium.launch({ executablePath, headless: true, args: CHROMIUM_FLAGS });
}
