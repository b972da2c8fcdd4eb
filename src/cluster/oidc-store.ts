// Where an `auth-provider: oidc` user's tokens live between refreshes: the kubeconfig file that
// defines the user, as client-go keeps them (plugin/pkg/client/auth/oidc/oidc.go persists the new
// id-token and refresh-token; clientcmd ModifyConfig rewrites the file under `<file>.lock`).
// Written back, a refresh token the identity provider rotated (Dex does by default) stays usable
// by kubectl; read again before a refresh, a token kubectl refreshed meanwhile is used as it is
// instead of a refresh token it has already spent.
import { chmodSync, closeSync, openSync, readFileSync, realpathSync, renameSync, rmSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { dumpKubeconfigYaml, kubeconfigText, loadKubeconfigYaml } from './kubeconfig-files.js';

/** The user extension (clientcmd AuthInfo.Extensions) naming that file in a daemon's kubeconfig. */
export const OIDC_STORE_EXTENSION = 'kubectl-proxyout.oidc-token-file';

export interface OidcTokens {
  'id-token'?: string;
  'refresh-token'?: string;
}

type Obj = Record<string, unknown>;

/** How long a write waits for another writer's `<file>.lock` (kubectl holds it for one write). */
const LOCK_WAIT_MS = 1_000;

export class OidcTokenStore {
  constructor(
    readonly file: string,
    readonly user: string,
  ) {}

  /** The user's id-token and refresh-token as the file has them now; undefined when unreadable. */
  read(): OidcTokens | undefined {
    try {
      const config = this.configIn(loadKubeconfigYaml(kubeconfigText(readFileSync(this.file))) as Obj);
      if (!config) return undefined;
      const pick = (k: keyof OidcTokens) => (typeof config[k] === 'string' ? (config[k] as string) : undefined);
      return { 'id-token': pick('id-token'), 'refresh-token': pick('refresh-token') };
    } catch {
      return undefined;
    }
  }

  /**
   * Writes the tokens into the user's auth-provider config, the rest of the file unchanged in
   * substance (it is written again, as kubectl writes it). False when it could not be: the file
   * gone or changed shape, another writer's lock held past LOCK_WAIT_MS.
   */
  async write(tokens: OidcTokens): Promise<boolean> {
    const lock = `${this.file}.lock`;
    if (!(await takeLock(lock))) return false;
    try {
      const doc = loadKubeconfigYaml(kubeconfigText(readFileSync(this.file))) as Obj;
      const config = this.configIn(doc);
      if (!config) return false;
      for (const [k, v] of Object.entries(tokens)) if (v !== undefined) config[k] = v;
      // A fresh name, created exclusively: a file planted under a guessable name (the pid) in a
      // directory others can write would keep its owner and mode, and be renamed over the kubeconfig.
      // Replaced where it really is: a symlinked kubeconfig (dotfiles) stays a link, as kubectl,
      // which writes through it, leaves it.
      const file = realpathSync(this.file);
      const temp = path.join(path.dirname(file), `.${path.basename(file)}.proxyout-${process.pid}.${randomBytes(6).toString('hex')}`);
      const mode = statSync(file).mode & 0o777;
      writeFileSync(temp, dumpKubeconfigYaml(doc), { mode, flag: 'wx' });
      try {
        chmodSync(temp, mode); // writeFileSync's mode passed through the umask
        renameSync(temp, file);
      } catch (err) {
        rmSync(temp, { force: true });
        throw err;
      }
      return true;
    } catch {
      return false;
    } finally {
      try {
        unlinkSync(lock);
      } catch {
        /* taken away meanwhile */
      }
    }
  }

  private configIn(doc: Obj | undefined): Obj | undefined {
    const users = doc && Array.isArray(doc.users) ? (doc.users as Array<{ name?: unknown; user?: Obj }>) : [];
    const provider = users.find((u) => u?.name === this.user)?.user?.['auth-provider'] as { name?: unknown; config?: Obj } | undefined;
    return provider?.name === 'oidc' && provider.config && typeof provider.config === 'object' ? provider.config : undefined;
  }
}

/** `<file>.lock` created exclusively, as clientcmd's lockFile does; waits a little for another holder. */
async function takeLock(lock: string): Promise<boolean> {
  const deadline = Date.now() + LOCK_WAIT_MS;
  for (;;) {
    try {
      closeSync(openSync(lock, 'wx', 0o600));
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || Date.now() > deadline) return false;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}
