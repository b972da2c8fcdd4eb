// The service definitions `service-install` writes: a systemd user unit (Linux; systemd.service(5),
// systemd.exec(5)) or a launchd LaunchAgent property list (macOS; launchd.plist(5)). Both run the
// foreground proxy with absolute paths, restart it when it fails, append its log (JSON lines) to
// the state directory and hand it the user's ssh-agent socket (SSH_AUTH_SOCK). Each file carries
// the sha256 of its own body, so that a later install can tell a file the user edited.
import { StartupError } from '../core/errors.js';
import { createHash } from 'node:crypto';

export type ServicePlatform = 'systemd' | 'launchd';

export interface ServiceSpec {
  /** systemd unit name without ".service", launchd label. */
  name: string;
  /** Absolute executable and its arguments (the foreground proxy's flags included). */
  command: string;
  args: string[];
  /** Absolute log file (in the state directory). */
  logFile: string;
  workingDirectory: string;
  /** Environment fixed at install time (PATH for exec plugins, KUBECONFIG, the state dir). */
  env: Record<string, string>;
  description: string;
  /**
   * Seconds the service manager waits after its SIGTERM before SIGKILL, when --shutdown-grace
   * asks for more than its defaults allow (systemd TimeoutStopSec 90 s, launchd ExitTimeOut 20 s).
   */
  stopTimeoutSec?: number;
}

export const MARKER = 'kubectl-proxyout-sha256:';

/** The file's text: the body, preceded by a comment holding the body's sha256. */
export function renderService(platform: ServicePlatform, spec: ServiceSpec): string {
  if (platform === 'systemd') {
    const body = systemdBody(spec);
    return `# Written by kubectl-proxyout service-install. If you edit this file, service-install\n# will not overwrite it without --force.\n# ${MARKER} ${sha256(body)}\n${body}`;
  }
  const body = launchdBody(spec);
  return `<?xml version="1.0" encoding="UTF-8"?>\n<!-- Written by kubectl-proxyout service-install. ${MARKER} ${sha256(body)} -->\n${body}`;
}

/** Whether the file is exactly as service-install wrote it (its recorded hash matches its body). */
export function isUnchanged(text: string): boolean {
  const m = new RegExp(`${MARKER} ([0-9a-f]{64})(?: -->)?\\n`).exec(text);
  if (!m) return false;
  return sha256(text.slice(m.index + m[0].length)) === m[1];
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/**
 * Inside "…" systemd takes C escapes (systemd.syntax(7) "Quoting"): a backslash and a quote are
 * escaped, and so is every control character (\xNN), so no newline or carriage return can end
 * the line and start a directive of its own.
 */
function systemdQuoted(text: string): string {
  return `"${text
    .replace(/\\/g, '\\\\')
    .replace(/"/g, '\\"')
    .replace(/[\x00-\x1f\x7f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`)}"`;
}

// systemd: an argument is quoted with "…" and \-escapes (systemd.service(5) "Command lines");
// "%" is a specifier and "$" an expansion, so both are doubled.
function systemdWord(word: string): string {
  const escaped = word.replace(/%/g, '%%').replace(/\$/g, '$$$$');
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(escaped)) return escaped;
  return systemdQuoted(escaped);
}

/** Description=: free text for people; control characters (a newline in a context name) become spaces. */
function systemdText(text: string): string {
  return text.replace(/[\x00-\x1f\x7f]/g, ' ').replace(/%/g, '%%');
}

/**
 * A path setting (WorkingDirectory=, StandardOutput=append:): the rest of the line is the path,
 * taken as it is — no quotes are removed — with specifiers expanded: "%" doubled (systemd.exec(5)).
 */
function systemdPath(p: string): string {
  if (/[\r\n]/.test(p) || p !== p.trim()) throw new StartupError(`a systemd unit cannot name the path ${JSON.stringify(p)}`);
  return p.replace(/%/g, '%%');
}

/** Environment=: one assignment, quoted when it needs to be; "%" is a specifier, "$" nothing special (systemd.exec(5)). */
function systemdEnvironment(assignment: string): string {
  const escaped = assignment.replace(/%/g, '%%');
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(escaped)) return escaped;
  return systemdQuoted(escaped);
}

function systemdBody(s: ServiceSpec): string {
  const env = Object.entries(s.env).map(([k, v]) => `Environment=${systemdEnvironment(`${k}=${v}`)}`);
  return [
    '[Unit]',
    `Description=${systemdText(s.description)}`,
    'After=network-online.target',
    'Wants=network-online.target',
    '',
    '[Service]',
    'Type=simple',
    `ExecStart=${[s.command, ...s.args].map(systemdWord).join(' ')}`,
    // `systemctl --user reload`: the proxy re-reads its routing table on SIGHUP (serve.ts); a bad
    // one changes nothing and it keeps serving.
    'ExecReload=/bin/kill -HUP $MAINPID',
    `WorkingDirectory=${systemdPath(s.workingDirectory)}`,
    ...env,
    // The user manager's ssh-agent socket, when it has one (`systemctl --user import-environment SSH_AUTH_SOCK`).
    'PassEnvironment=SSH_AUTH_SOCK',
    'Restart=on-failure',
    'RestartSec=5s',
    // Restarting cannot help when the program is gone (203: exec failed — a versioned file an
    // upgrade removed; 127: `env` found no node for npm's script) or refuses its own arguments
    // (2: a usage error). Other failures (1: the API server unreachable while the network comes
    // up) are retried for as long as they last: no start limit could tell them apart.
    'RestartPreventExitStatus=2 127 203',
    ...(s.stopTimeoutSec !== undefined ? [`TimeoutStopSec=${s.stopTimeoutSec}s`] : []),
    `StandardOutput=append:${systemdPath(s.logFile)}`,
    `StandardError=append:${systemdPath(s.logFile)}`,
    '',
    '[Install]',
    'WantedBy=default.target',
    '',
  ].join('\n');
}

/**
 * Text in a plist <string>: XML-escaped; a newline, carriage return or tab as a character
 * reference (a parser would fold a raw CR into LF); other control characters cannot be in XML 1.0
 * at all, so such a value is refused.
 */
function xml(text: string): string {
  if (/[\x00-\x08\x0b\x0c\x0e-\x1f]/.test(text))
    throw new StartupError(`a launchd property list cannot hold the control characters in ${JSON.stringify(text)}`);
  return text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/[\t\n\r]/g, (c) => `&#${c.charCodeAt(0)};`);
}

function launchdBody(s: ServiceSpec): string {
  const str = (v: string) => `<string>${xml(v)}</string>`;
  const lines = [
    '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">',
    '<plist version="1.0">',
    '<dict>',
    `  <key>Label</key>${str(s.name)}`,
    '  <key>ProgramArguments</key>',
    '  <array>',
    ...[s.command, ...s.args].map((a) => `    ${str(a)}`),
    '  </array>',
    // launchd starts agents in the gui domain with the session's environment, SSH_AUTH_SOCK (the
    // system ssh-agent's socket) included; only what we fix here is added to it.
    '  <key>EnvironmentVariables</key>',
    '  <dict>',
    ...Object.entries(s.env).map(([k, v]) => `    <key>${xml(k)}</key>${str(v)}`),
    '  </dict>',
    `  <key>WorkingDirectory</key>${str(s.workingDirectory)}`,
    '  <key>RunAtLoad</key><true/>',
    // Restart when it exits with a failure, not after a clean stop.
    '  <key>KeepAlive</key>',
    '  <dict>',
    '    <key>SuccessfulExit</key><false/>',
    '  </dict>',
    '  <key>ThrottleInterval</key><integer>5</integer>',
    ...(s.stopTimeoutSec !== undefined ? [`  <key>ExitTimeOut</key><integer>${s.stopTimeoutSec}</integer>`] : []),
    '  <key>ProcessType</key><string>Background</string>',
    `  <key>StandardOutPath</key>${str(s.logFile)}`,
    `  <key>StandardErrorPath</key>${str(s.logFile)}`,
    '</dict>',
    '</plist>',
    '',
  ];
  return lines.join('\n');
}
