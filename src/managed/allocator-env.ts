// The C allocator a daemon starts with. glibc's malloc raises its mmap and trim thresholds each
// time a large block is freed (mallopt(3), M_MMAP_THRESHOLD, "dynamic mmap threshold"); Node's own
// start frees a few MiB (the bundle's source as it was read), and from then on no malloc heap gives
// back free space under ~8 MiB. A daemon is held all day: after a big cluster's first sync it kept
// that slack in the main heap and in each V8 worker thread's arena. Any fixed threshold turns the
// adjustment off (docs/performance.md, "Against the real control plane").
/** The environment entries to add; none where the user chose their own, or off glibc's platform. */
export function allocatorEnv(env: NodeJS.ProcessEnv, platform: NodeJS.Platform = process.platform): Record<string, string> {
  if (platform !== 'linux') return {};
  const own = Object.keys(env).some((k) => k.startsWith('MALLOC_')) || /glibc\.malloc\./.test(env.GLIBC_TUNABLES ?? '');
  return own ? {} : { MALLOC_TRIM_THRESHOLD_: String(1024 * 1024) };
}
