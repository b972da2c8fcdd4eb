// A cluster that answers only behind the ssh lab's chain (test/helpers/ssh-lab.ts): the simulated
// cluster inside the target's network namespace, and a home and proxyout config whose cluster
// route `hidden` goes `via` the ssh route `jump` (jump1 → jump2). For ssh-via and doctor-egress.
import { spawn, type ChildProcess } from 'node:child_process';
import { copyFile, mkdir, writeFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { TARGET, type SshLab } from './ssh-lab.js';

const SIM_MAIN = fileURLToPath(new URL('../sim/main.js', import.meta.url));

/** Starts the simulated cluster on the target's address, inside its namespace: this host has no route there. Resolves once it printed its kubeconfig. */
export async function startSimBehindChain(lab: SshLab): Promise<{ sim: ChildProcess; kubeconfig: string }> {
  const sim = spawn('ip', ['netns', 'exec', lab.namespaces.c, process.execPath, SIM_MAIN, path.join(lab.dir, 'kubeconfig')], {
    env: { ...process.env, SIM_HOST: TARGET.ip, SIM_PORT: '6443' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: sim.stdout! }).once('line', resolve);
    sim.once('exit', (code) => reject(new Error(`the simulated cluster exited (${code})`)));
  });
  return { sim, kubeconfig: (JSON.parse(line) as { kubeconfig: string }).kubeconfig };
}

/**
 * ~/.ssh of a home of its own (the user key, the hosts' keys, the chain jump1 → jump2) and a
 * proxyout config: ssh route jump to jump2, default cluster route hidden (context sim) via jump.
 */
export async function writeViaConfig(lab: SshLab): Promise<{ home: string; config: string }> {
  const home = path.join(lab.dir, 'home');
  await mkdir(path.join(home, '.ssh'), { recursive: true, mode: 0o700 });
  const knownHosts = path.join(home, '.ssh', 'known_hosts');
  await writeFile(knownHosts, `${lab.knownHostsLines.jump1}\n${lab.knownHostsLines.jump2}\n`);
  await copyFile(lab.writeConfig('via', { all: [`IdentityFile ${lab.userKey}`, `UserKnownHostsFile ${knownHosts}`] }), path.join(home, '.ssh', 'config'));
  const config = path.join(lab.dir, 'proxyout.yaml');
  const routes = [
    '  - name: jump',
    '    kind: ssh',
    '    ssh: { host: jump2 }',
    '  - name: hidden',
    '    kind: cluster',
    '    context: sim',
    '    default: true',
    '    via: jump',
  ];
  await writeFile(config, ['routes:', ...routes, ''].join('\n'));
  return { home, config };
}
