// The C allocator a daemon starts with. glibc's malloc raises its mmap and trim thresholds each
// time a large block is freed (mallopt(3), M_MMAP_THRESHOLD, "dynamic mmap threshold"); V8 frees
// blocks of 256 KiB at start-up, and from then on its worker threads' compiles take blocks that
// size from their arenas, which keep what a big cluster's first sync left all day. A fixed
// threshold turns the adjustment off: those blocks are mapped and unmapped on their own, and the
// arenas hold about half (docs/performance.md, "Against the real control plane").
/** The environment entries to add; none where the user chose their own, or off glibc's platform. */
export function allocatorEnv(env: NodeJS.ProcessEnv, platform: NodeJS.Platform = process.platform): Record<string, string> {
  if (platform !== 'linux') return {};
  const own = Object.keys(env).some((k) => k.startsWith('MALLOC_')) || /glibc\.malloc\./.test(env.GLIBC_TUNABLES ?? '');
  return own ? {} : { MALLOC_TRIM_THRESHOLD_: String(1024 * 1024) };
}
