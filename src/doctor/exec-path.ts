// Where an exec credential plugin would be found: the way Go's os/exec.LookPath (which client-go
// uses) searches — a name with a path separator is taken as it is; a bare name is looked up in
// PATH, with PATHEXT's extensions on Windows.
import { accessSync, constants, statSync } from 'node:fs';
import path from 'node:path';

export function findExecutable(command: string, env: NodeJS.ProcessEnv = process.env, platform: NodeJS.Platform = process.platform): string | undefined {
  const p = platform === 'win32' ? path.win32 : path.posix;
  const exts = platform === 'win32' ? (env.PATHEXT ?? '.COM;.EXE;.BAT;.CMD').split(';').filter(Boolean) : [''];
  const candidates = (base: string) => (platform === 'win32' && p.extname(base) === '' ? exts.map((e) => base + e) : [base]);
  if (command.includes('/') || (platform === 'win32' && command.includes('\\'))) {
    return candidates(command).find((c) => isExecutable(c, platform));
  }
  const dirs = (env.PATH ?? env.Path ?? '').split(platform === 'win32' ? ';' : ':').filter(Boolean);
  for (const dir of dirs) {
    const found = candidates(p.join(dir, command)).find((c) => isExecutable(c, platform));
    if (found) return found;
  }
  return undefined;
}

function isExecutable(file: string, platform: NodeJS.Platform): boolean {
  try {
    if (!statSync(file).isFile()) return false;
    if (platform !== 'win32') accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
