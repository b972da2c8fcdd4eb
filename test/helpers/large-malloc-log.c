// LD_PRELOAD library for tests: appends a line for every block of at least $LARGE_MALLOC_MIN bytes
// that malloc, calloc or realloc hands out ("alloc N") and that is given back ("free N"), to the
// file $LARGE_MALLOC_LOG. Freeing such a block is what raises glibc's dynamic mmap and trim
// thresholds (mallopt(3)). glibc only (dlsym(RTLD_NEXT)); built by compile-cache.test.ts.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
// dlsym itself may calloc before real_calloc is known: served from here, never freed.
static char early[4096];
static size_t early_used;
static __thread int inside;

// The large blocks handed out and not yet given back (a test process holds a few).
#define TRACKED 256
static struct { void *p; size_t n; } blocks[TRACKED];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static size_t min_size;
static int log_fd = -2;

static void write_line(const char *what, size_t n) {
  char line[48];
  int len = snprintf(line, sizeof line, "%s %zu\n", what, n);
  if (log_fd >= 0 && write(log_fd, line, len) < 0) {}
}

static void setup(void) {
  if (log_fd != -2) return;
  const char *m = getenv("LARGE_MALLOC_MIN");
  const char *f = getenv("LARGE_MALLOC_LOG");
  min_size = m ? strtoull(m, NULL, 10) : 1048576;
  log_fd = f ? open(f, O_WRONLY | O_CREAT | O_APPEND, 0600) : -1;
}

static void handed_out(void *p, size_t n) {
  if (inside || !p) return;
  inside = 1;
  pthread_mutex_lock(&lock);
  setup();
  if (n >= min_size) {
    write_line("alloc", n);
    for (int i = 0; i < TRACKED; i++)
      if (!blocks[i].p) {
        blocks[i].p = p;
        blocks[i].n = n;
        break;
      }
  }
  pthread_mutex_unlock(&lock);
  inside = 0;
}

static void given_back(void *p) {
  if (inside || !p) return;
  inside = 1;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < TRACKED; i++)
    if (blocks[i].p == p) {
      write_line("free", blocks[i].n);
      blocks[i].p = NULL;
      break;
    }
  pthread_mutex_unlock(&lock);
  inside = 0;
}

void *malloc(size_t n) {
  if (!real_malloc) real_malloc = dlsym(RTLD_NEXT, "malloc");
  void *p = real_malloc(n);
  handed_out(p, n);
  return p;
}

void *calloc(size_t a, size_t b) {
  if (!real_calloc) {
    static int resolving;
    if (resolving) {
      void *p = early + early_used;
      early_used += (a * b + 15) & ~(size_t)15;
      return early_used <= sizeof early ? memset(p, 0, a * b) : NULL;
    }
    resolving = 1;
    real_calloc = dlsym(RTLD_NEXT, "calloc");
  }
  void *p = real_calloc(a, b);
  handed_out(p, a * b);
  return p;
}

void *realloc(void *old, size_t n) {
  if (!real_realloc) real_realloc = dlsym(RTLD_NEXT, "realloc");
  given_back(old);
  void *p = real_realloc(old, n);
  handed_out(p, n);
  return p;
}

void free(void *p) {
  if (!real_free) real_free = dlsym(RTLD_NEXT, "free");
  if ((char *)p >= early && (char *)p < early + sizeof early) return;
  given_back(p);
  real_free(p);
}
