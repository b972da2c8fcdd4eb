// `service-install` / `service-uninstall`: where the service file goes, writing it without
// clobbering a user's edits, and the lines that start or stop it (printed, not run: enabling a
// login service is the user's call). Platform, home, uid and environment are parameters so that
// each platform is tested anywhere.
import { closeSync, lstatSync, mkdirSync, openSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { StartupError } from '../core/errors.js';
import { isUnchanged, renderService, type ServicePlatform, type ServiceSpec } from './units.js';

export const DEFAULT_SERVICE_NAME = 'kubectl-proxyout';
const NAME = /^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$/;

export interface ServiceHost {
  platform: NodeJS.Platform;
  home: string;
  uid: number;
  env: NodeJS.ProcessEnv;
}

export function servicePlatform(platform: NodeJS.Platform): ServicePlatform {
  if (platform === 'linux') return 'systemd';
  if (platform === 'darwin') return 'launchd';
  throw new StartupError(`service-install supports Linux (systemd user units) and macOS (launchd agents), not ${platform}`);
}

export function validateServiceName(name: string): string {
  if (!NAME.test(name)) throw new StartupError(`invalid service name "${name}": 1 to 64 letters, digits, "_", ".", "@" or "-"`);
  return name;
}

/** ~/.config/systemd/user/NAME.service ($XDG_CONFIG_HOME honoured) or ~/Library/LaunchAgents/NAME.plist. */
export function serviceFile(host: ServiceHost, name: string): string {
  if (servicePlatform(host.platform) === 'systemd') {
    const config = host.env.XDG_CONFIG_HOME && path.isAbsolute(host.env.XDG_CONFIG_HOME) ? host.env.XDG_CONFIG_HOME : path.join(host.home, '.config');
    return path.join(config, 'systemd', 'user', `${name}.service`);
  }
  return path.join(host.home, 'Library', 'LaunchAgents', `${name}.plist`);
}

export interface InstallResult {
  file: string;
  text: string;
  /** false: the same file was there already. */
  changed: boolean;
  /** Lines for the user to run. */
  next: string[];
  /** The line that makes the running service re-read its routing table (SIGHUP). */
  reload: string;
}

export function installService(host: ServiceHost, spec: ServiceSpec, opts: { dryRun: boolean; force: boolean }): InstallResult {
  const platform = servicePlatform(host.platform);
  const file = serviceFile(host, spec.name);
  const text = renderService(platform, spec);
  const existing = readIfExists(file);
  if (existing !== undefined && existing !== text && !isUnchanged(existing) && !opts.force) {
    throw new StartupError(`${file} was changed after service-install wrote it (or was not written by it): pass --force to overwrite it`);
  }
  const next = startLines(platform, host, spec.name, file, existing !== undefined);
  const reload = platform === 'systemd' ? `systemctl --user reload ${spec.name}.service` : `launchctl kill SIGHUP gui/${host.uid}/${spec.name}`;
  if (opts.dryRun) return { file, text, changed: existing !== text, next, reload };
  if (existing !== text) {
    // Never writable by others, whatever the umask (000, or 002 with a shared group): another user
    // who could add a unit there would have it run as this user at the next daemon-reload or login.
    mkdirSync(path.dirname(file), { recursive: true, mode: 0o755 });
    mkdirSync(path.dirname(spec.logFile), { recursive: true, mode: 0o700 });
    // Made here, 0600: systemd's append: and launchd create a missing log file 0644 (0666 minus
    // the umask), which would be readable by others — and doctor fails the state directory for it.
    closeSync(openSync(spec.logFile, 'a', 0o600));
    writeFileSync(file, text, { mode: 0o644 });
  }
  return { file, text, changed: existing !== text, next, reload };
}

function startLines(platform: ServicePlatform, host: ServiceHost, name: string, file: string, existed: boolean): string[] {
  if (platform === 'systemd') {
    return [
      ...(host.env.SSH_AUTH_SOCK ? ['systemctl --user import-environment SSH_AUTH_SOCK'] : []),
      'systemctl --user daemon-reload',
      existed ? `systemctl --user enable ${name}.service && systemctl --user restart ${name}.service` : `systemctl --user enable --now ${name}.service`,
    ];
  }
  return [...(existed ? [`launchctl bootout gui/${host.uid}/${name}`] : []), `launchctl bootstrap gui/${host.uid} ${shellWord(file)}`];
}

export interface UninstallResult {
  file: string;
  removed: boolean;
  next: string[];
}

export function uninstallService(host: ServiceHost, name: string, opts: { force: boolean; dryRun?: boolean }): UninstallResult {
  const platform = servicePlatform(host.platform);
  const file = serviceFile(host, name);
  const existing = readIfExists(file);
  if (existing === undefined) return { file, removed: false, next: [] };
  if (!isUnchanged(existing) && !opts.force) {
    throw new StartupError(`${file} was changed after service-install wrote it (or was not written by it): pass --force to remove it`);
  }
  const next =
    platform === 'systemd'
      ? [`systemctl --user stop ${name}.service`, 'systemctl --user daemon-reload', `systemctl --user reset-failed ${name}.service`]
      : [`launchctl bootout gui/${host.uid}/${name}`];
  if (opts.dryRun) return { file, removed: false, next };
  if (platform === 'systemd') {
    // `enable` made default.target.wants/NAME.service → our file; remove that link too, only if it is ours.
    const wants = path.join(path.dirname(file), 'default.target.wants', `${name}.service`);
    if (isLinkTo(wants, file)) rmSync(wants);
  }
  rmSync(file);
  return { file, removed: true, next };
}

function readIfExists(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new StartupError(`cannot read ${file}: ${(err as Error).message}`, { cause: err });
  }
}

function isLinkTo(link: string, target: string): boolean {
  try {
    return lstatSync(link).isSymbolicLink() && path.resolve(path.dirname(link), readlinkSync(link)) === target;
  } catch {
    return false;
  }
}

/** A word for a POSIX shell line the user copies. */
export function shellWord(word: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}
