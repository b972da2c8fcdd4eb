// ssh2, loaded only when an ssh route starts. Evaluating it costs every process: its poly1305 is
// an Emscripten WebAssembly module that allocates 16 MiB of linear memory as it is evaluated
// (ssh2 lib/crypto/poly1305.js; V8 counts it as external memory, though few of its pages are ever
// touched), and the module's code itself — a proxy without ssh routes needs none of it.
// In the bundle the dynamic import stays lazy (esbuild evaluates a bundled module on first use).
import type * as Ssh2 from 'ssh2';

type Ssh2Module = typeof Ssh2;

let loaded: Ssh2Module | undefined;

/** Loads ssh2 once; everything that uses ssh2() runs after this resolved. */
export async function loadSsh2(): Promise<Ssh2Module> {
  if (!loaded) {
    const mod = (await import('ssh2')) as Ssh2Module & { default?: Ssh2Module };
    loaded = mod.default ?? mod;
  }
  return loaded;
}

export function ssh2Loaded(): boolean {
  return loaded !== undefined;
}

/** ssh2 after loadSsh2(): a programming error to call it before. */
export function ssh2(): Ssh2Module {
  if (!loaded) throw new Error('ssh2 is used before loadSsh2() resolved');
  return loaded;
}
