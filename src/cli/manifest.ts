// oclif.manifest.json is committed so help and command lookup never import command modules.
// A stale one silently hides new commands and flags, so it is regenerated in memory by the
// test suite (test/unit/cli-manifest.test.ts) and compared byte for byte.
import { Plugin } from '@oclif/core';

/** Build the manifest exactly as oclif 4's `oclif manifest` does (same Plugin options). */
export async function buildManifest(root: string): Promise<unknown> {
  const plugin = new Plugin({
    errorOnManifestCreate: true,
    ignoreManifest: true,
    respectNoCacheDefault: true,
    root,
    type: 'core',
  });
  await plugin.load();
  return plugin.manifest;
}

/**
 * The committed form: 2-space JSON with a final newline (`oclif manifest` omits it). Nothing
 * machine-specific is in the manifest today (paths are relative, defaults are static); if a
 * flag ever gets an environment-derived default, mark it `noCacheDefault` rather than
 * rewriting it here.
 */
export function serializeManifest(manifest: unknown): string {
  return `${JSON.stringify(manifest, null, 2)}\n`;
}
