import { execFile } from 'node:child_process';

export interface CurlResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Real curl, never reading proxy settings from the environment (we pass them explicitly). */
export function curl(args: string[], timeoutMs = 20_000): Promise<CurlResult> {
  return new Promise((resolve) => {
    const env = { ...process.env };
    for (const k of ['ALL_PROXY', 'all_proxy', 'HTTP_PROXY', 'http_proxy', 'HTTPS_PROXY', 'https_proxy', 'NO_PROXY', 'no_proxy']) delete env[k];
    execFile(
      'curl',
      ['--silent', '--show-error', '--max-time', String(Math.ceil(timeoutMs / 1000)), ...args],
      { env, encoding: 'utf8', maxBuffer: 64 << 20 },
      (err, stdout, stderr) => {
        const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : -1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}
