/*
 * repro-shim.c: makes a WebAssembly pre-initialiser see the same world on
 * every build, so that the same sources give a byte-identical component.
 *
 * componentize-py (Python SDK) and ComponentizeJS's wizer (JS SDK) run the
 * guest's start-up code (CPython importing the plugin; SpiderMonkey
 * evaluating the bundle) inside wasmtime and store the guest's whole linear
 * memory in the component. Whatever the guest read from the host during that
 * run is in the snapshot, in live objects and in freed memory alike: the
 * random bytes behind CPython's str hash secret and SpiderMonkey's hash and
 * Math.random seeds, clock readings, and the file metadata of the stdlib and
 * sources (mtimes, and inode numbers, which WASI reports as a hash of the
 * host's dev and ino). Neither tool can be told to fix them (componentize-py
 * 0.25.1 builds its WASI context itself, without the caller's environment,
 * so PYTHONHASHSEED does not reach the guest), so build.sh loads this file
 * into the pre-initialiser with LD_PRELOAD: the Python process that runs
 * componentize-py, or wizer. It replaces, in that process:
 *
 *   - getrandom(2), getentropy(3), syscall(SYS_getrandom): a fixed stream per
 *     thread (splitmix64 of WEFT_REPRO_SEED; build.sh derives the seed from
 *     the sources). Rust's thread_rng, which seeds wasmtime-wasi's random
 *     and insecure-random contexts, reads from here.
 *   - clock_gettime(2): CLOCK_REALTIME* reads SOURCE_DATE_EPOCH; the
 *     monotonic and boot-time clocks read a fixed 1 s. After a million reads
 *     on one thread that thread gets the real clocks again, so that no host
 *     loop can spin for ever waiting for time to pass.
 *   - statx(2) and the stat(2) family: all timestamps become
 *     SOURCE_DATE_EPOCH, the device a constant, the inode number a dense
 *     counter in order of first sight (a bijection, so "same file?" answers
 *     do not change) and a directory's size 4096 whatever the filesystem.
 *   - getdents64(2): a directory's entries in name order, whatever the
 *     filesystem's order.
 *
 *   wasmtime-wasi makes these calls itself through rustix, without libc, so
 *   on x86_64 a seccomp filter traps every such call not made from a fixed
 *   `syscall; ret` stub, and a SIGSYS handler re-issues it through the stub
 *   and rewrites the result. Elsewhere only libc's statx() is rewritten (the
 *   build then stays non-reproducible).
 *
 * The seccomp filter survives exec(2) but the SIGSYS handler does not: a
 * program exec'd from a process running this shim is killed by SIGSYS at its
 * first stat call (in ld.so). build.sh therefore loads it only into processes
 * that do not exec (componentize-py's Python, with its site-packages lookup
 * done beforehand; wizer, through a wrapper that execs it).
 *
 * Nothing here changes what the component does at run time: it only fixes
 * values the build captured by accident (the seeds that were random at build
 * time are in every build's snapshot; they now derive from the sources).
 * sdk/repro.sh compiles it for sdk/python/build.sh and sdk/js/build.sh.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) && defined(__linux__)
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <ucontext.h>
#define REPRO_SECCOMP 1
#endif

static uint64_t seed = 0x5745465452455052ull; /* "WEFTREPR" */
static int64_t epoch = 315532800;              /* 1980-01-01, as in zip files */

/* ---- randomness ------------------------------------------------------- */

static __thread uint64_t rand_state;
static __thread int rand_started;

static uint64_t next64(void) {
  if (!rand_started) { rand_state = seed; rand_started = 1; }
  uint64_t z = (rand_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void fill(void *buf, size_t n) {
  unsigned char *p = buf;
  while (n) {
    uint64_t v = next64();
    size_t k = n < 8 ? n : 8;
    memcpy(p, &v, k);
    p += k;
    n -= k;
  }
}

ssize_t getrandom(void *buf, size_t len, unsigned flags) {
  (void)flags;
  fill(buf, len);
  return (ssize_t)len;
}

int getentropy(void *buf, size_t len) {
  if (len > 256) { errno = EIO; return -1; }
  fill(buf, len);
  return 0;
}

long syscall(long nr, ...) {
  va_list ap;
  va_start(ap, nr);
  long a[6];
  for (int i = 0; i < 6; i++) a[i] = va_arg(ap, long);
  va_end(ap);
  if (nr == SYS_getrandom) {
    fill((void *)a[0], (size_t)a[1]);
    return a[1];
  }
  static long (*real)(long, ...);
  if (!real) real = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
  return real(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

/* ---- clocks ----------------------------------------------------------- */

static __thread unsigned long clock_reads;

int clock_gettime(clockid_t clk, struct timespec *ts) {
  static int (*real)(clockid_t, struct timespec *);
  if (!real) real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
  if (++clock_reads > 1000000) return real(clk, ts);
  switch (clk) {
  case CLOCK_REALTIME:
  case CLOCK_REALTIME_COARSE:
  case CLOCK_TAI:
    ts->tv_sec = epoch;
    ts->tv_nsec = 0;
    return 0;
  case CLOCK_MONOTONIC:
  case CLOCK_MONOTONIC_RAW:
  case CLOCK_MONOTONIC_COARSE:
  case CLOCK_BOOTTIME:
    ts->tv_sec = 1;
    ts->tv_nsec = 0;
    return 0;
  default:
    return real(clk, ts);
  }
}

/* ---- file metadata ---------------------------------------------------- */

/* An open-addressing table from (dev, ino) to the dense number; a slot is
   free while its number is 0. It stores the pair itself, not a hash of it:
   two files must never share a number, or "same file?" answers (and every
   number handed out after them) would depend on the host's inode numbers. */
#define INO_SLOTS (1u << 20)
struct ino_slot { uint64_t dev, ino, val; };
static struct ino_slot *ino_table;
static uint64_t ino_count;
static int ino_lock;

static uint64_t map_ino(uint64_t dev, uint64_t ino) {
  if (!ino_table) return ino;
  uint64_t h = ((dev * 0x9e3779b97f4a7c15ull) ^ (ino * 0xbf58476d1ce4e5b9ull)) >> 44, r = ino;
  while (__atomic_test_and_set(&ino_lock, __ATOMIC_ACQUIRE)) {}
  for (uint64_t i = 0; i < INO_SLOTS; i++) {
    struct ino_slot *e = &ino_table[(h + i) & (INO_SLOTS - 1)];
    if (e->val && e->dev == dev && e->ino == ino) { r = e->val; break; }
    if (!e->val) {
      if (ino_count >= INO_SLOTS / 2) break; /* full: leave it as it is */
      e->dev = dev;
      e->ino = ino;
      r = e->val = 0x10000 + ino_count++;
      break;
    }
  }
  __atomic_clear(&ino_lock, __ATOMIC_RELEASE);
  return r;
}

static void fix_statx(struct statx *b) {
  struct statx_timestamp t;
  memset(&t, 0, sizeof t);
  t.tv_sec = epoch;
  b->stx_atime = t;
  b->stx_btime = t;
  b->stx_ctime = t;
  b->stx_mtime = t;
  b->stx_ino = map_ino(((uint64_t)b->stx_dev_major << 32) | b->stx_dev_minor, b->stx_ino);
  b->stx_dev_major = 0;
  b->stx_dev_minor = 1;
  if (S_ISDIR(b->stx_mode)) { /* filesystem-specific: 4096 on ext4, 20 per entry on tmpfs */
    b->stx_size = 4096;
    b->stx_blocks = 8;
  }
}

static int trap_armed;

#ifdef REPRO_SECCOMP
#define STUB_ADDR 0x5eed0000000ul
/* mov %r9,%rax; mov %rcx,%r10; syscall; ret -- called as
   stub(a1, a2, a3, a4, a5, nr) with the System V argument registers. */
static const unsigned char stub_code[] = {0x4c, 0x89, 0xc8, 0x49, 0x89, 0xca, 0x0f, 0x05, 0xc3};
#define STUB_AFTER_SYSCALL (STUB_ADDR + 8)
typedef long (*stub_fn)(long, long, long, long, long, long);

/* The struct stat of the stat family, rewritten as fix_statx does. */
static void fix_stat(struct stat *b) {
  struct timespec t = {.tv_sec = epoch, .tv_nsec = 0};
  b->st_atim = t;
  b->st_mtim = t;
  b->st_ctim = t;
  /* the key fix_statx uses, so a file has one number whichever call sees it */
  b->st_ino = map_ino(((uint64_t)major(b->st_dev) << 32) | minor(b->st_dev), b->st_ino);
  b->st_dev = 1;
  if (S_ISDIR(b->st_mode)) { b->st_size = 4096; b->st_blocks = 8; } /* as fix_statx */
}

/* getdents64(2) in name order. The order the host's filesystem lists a
   directory in (ext4 hashes large directories with a per-filesystem seed,
   tmpfs lists newest first) reaches the snapshot: CPython keeps each
   directory's listing in a set, whose layout depends on insertion order. The
   first call on a directory read from its start reads it whole through the
   stub, sorts the entries by name and serves them from a copy; the last
   call frees the copy. d_off becomes the entry's position in that order. */
struct dirent64_raw { uint64_t d_ino; int64_t d_off; unsigned short d_reclen; unsigned char d_type; char d_name[]; };
#define DIR_SLOTS 64
struct dir_copy { long fd; uint64_t dev, ino; char *data; size_t len, cap, pos; };
static struct dir_copy dir_copies[DIR_SLOTS];
static int dir_lock;

static long stub(long a1, long a2, long a3, long a4, long a5, long nr) {
  return ((stub_fn)STUB_ADDR)(a1, a2, a3, a4, a5, nr);
}

static int name_cmp(const char *a, const char *b) {
  while (*a && *a == *b) { a++; b++; }
  return (unsigned char)*a - (unsigned char)*b;
}

static void dir_free(struct dir_copy *c) {
  if (c->data) munmap(c->data, c->cap);
  memset(c, 0, sizeof *c);
  c->fd = -1;
}

/* Reads the whole directory into c, sorted; 0 or -errno. */
static long dir_load(struct dir_copy *c, long fd) {
  size_t cap = 1 << 16, len = 0;
  char *raw = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return -ENOMEM;
  for (;;) {
    if (cap - len < 1 << 15) {
      char *n = mremap(raw, cap, cap * 2, MREMAP_MAYMOVE);
      if (n == MAP_FAILED) { munmap(raw, cap); return -ENOMEM; }
      raw = n;
      cap *= 2;
    }
    long r = stub(fd, (long)(raw + len), (long)(cap - len), 0, 0, SYS_getdents64);
    if (r < 0) { munmap(raw, cap); return r; }
    if (r == 0) break;
    len += (size_t)r;
  }
  size_t n = 0;
  for (size_t o = 0; o < len; o += ((struct dirent64_raw *)(raw + o))->d_reclen) n++;
  size_t isz = (n ? n : 1) * sizeof(char *);
  char **ix = mmap(NULL, isz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  char *out = mmap(NULL, len ? len : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (ix == MAP_FAILED || out == MAP_FAILED) {
    if (ix != MAP_FAILED) munmap(ix, isz);
    if (out != MAP_FAILED) munmap(out, len ? len : 1);
    munmap(raw, cap);
    return -ENOMEM;
  }
  size_t i = 0;
  for (size_t o = 0; o < len; o += ((struct dirent64_raw *)(raw + o))->d_reclen) ix[i++] = raw + o;
  /* Shell sort: no allocation, fine in a signal handler. */
  for (size_t gap = n / 2; gap > 0; gap /= 2)
    for (size_t a = gap; a < n; a++)
      for (size_t b = a; b >= gap && name_cmp(((struct dirent64_raw *)ix[b - gap])->d_name,
                                              ((struct dirent64_raw *)ix[b])->d_name) > 0; b -= gap) {
        char *t = ix[b]; ix[b] = ix[b - gap]; ix[b - gap] = t;
      }
  size_t o = 0;
  for (i = 0; i < n; i++) {
    struct dirent64_raw *e = (struct dirent64_raw *)ix[i];
    memcpy(out + o, e, e->d_reclen);
    ((struct dirent64_raw *)(out + o))->d_off = (int64_t)(i + 1);
    o += e->d_reclen;
  }
  munmap(ix, isz);
  munmap(raw, cap);
  c->data = out;
  c->len = len;
  c->cap = len ? len : 1;
  c->pos = 0;
  return 0;
}

static long sorted_getdents64(long fd, char *buf, size_t count) {
  struct stat st;
  long r = stub(fd, (long)&st, 0, 0, 0, SYS_fstat);
  if (r < 0) return r;
  long off = stub(fd, 0, SEEK_CUR, 0, 0, SYS_lseek);
  while (__atomic_test_and_set(&dir_lock, __ATOMIC_ACQUIRE)) {}
  struct dir_copy *c = NULL, *free_slot = NULL;
  for (int i = 0; i < DIR_SLOTS; i++) {
    if (dir_copies[i].data && dir_copies[i].fd == fd) c = &dir_copies[i];
    else if (!dir_copies[i].data && !free_slot) free_slot = &dir_copies[i];
  }
  if (c && (off == 0 || c->dev != st.st_dev || c->ino != st.st_ino)) { dir_free(c); free_slot = c; c = NULL; }
  if (!c) {
    if (off != 0 || !free_slot) { /* not from the start, or too many open: as it comes */
      __atomic_clear(&dir_lock, __ATOMIC_RELEASE);
      return stub(fd, (long)buf, (long)count, 0, 0, SYS_getdents64);
    }
    c = free_slot;
    r = dir_load(c, fd);
    if (r < 0) { dir_free(c); __atomic_clear(&dir_lock, __ATOMIC_RELEASE); return r; }
    c->fd = fd;
    c->dev = st.st_dev;
    c->ino = st.st_ino;
  }
  size_t n = 0;
  while (c->pos + n < c->len) {
    unsigned short l = ((struct dirent64_raw *)(c->data + c->pos + n))->d_reclen;
    if (n + l > count) break;
    n += l;
  }
  if (n == 0 && c->pos < c->len) r = -EINVAL; /* buffer too small for the next entry */
  else {
    memcpy(buf, c->data + c->pos, n);
    c->pos += n;
    r = (long)n;
    if (n == 0) dir_free(c); /* the end: later calls read the real (exhausted) fd */
  }
  __atomic_clear(&dir_lock, __ATOMIC_RELEASE);
  return r;
}

static void on_sigsys(int sig, siginfo_t *si, void *ctx) {
  (void)sig;
  greg_t *g = ((ucontext_t *)ctx)->uc_mcontext.gregs;
  long nr = si->si_syscall;
  int saved = errno;
  if (nr == SYS_getdents64) {
    g[REG_RAX] = sorted_getdents64(g[REG_RDI], (char *)g[REG_RSI], (size_t)g[REG_RDX]);
    errno = saved;
    return;
  }
  if (nr != SYS_statx && nr != SYS_newfstatat && nr != SYS_fstat && nr != SYS_stat &&
      nr != SYS_lstat) {
    g[REG_RAX] = -ENOSYS;
    return;
  }
  long r = ((stub_fn)STUB_ADDR)(g[REG_RDI], g[REG_RSI], g[REG_RDX], g[REG_R10], g[REG_R8], nr);
  if (r == 0) {
    if (nr == SYS_statx) fix_statx((struct statx *)g[REG_R8]);
    else if (nr == SYS_newfstatat) fix_stat((struct stat *)g[REG_RDX]);
    else fix_stat((struct stat *)g[REG_RSI]);
  }
  g[REG_RAX] = r;
  errno = saved;
}

static void arm_trap(void) {
  void *p = mmap((void *)STUB_ADDR, 4096, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (p == MAP_FAILED) {
    /* after fork(), the parent's stub is already mapped here */
    if (errno != EEXIST || memcmp((void *)STUB_ADDR, stub_code, sizeof stub_code) != 0) return;
  } else {
    if (p != (void *)STUB_ADDR) { munmap(p, 4096); return; } /* kernels before 4.17 */
    memcpy(p, stub_code, sizeof stub_code);
    if (mprotect(p, 4096, PROT_READ | PROT_EXEC) != 0) return;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sigsys;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGSYS, &sa, NULL) != 0) return;
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getdents64, 6, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_statx, 5, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_newfstatat, 4, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_fstat, 3, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_stat, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_lstat, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, instruction_pointer) + 4),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)(STUB_AFTER_SYSCALL >> 32), 0, 2),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, instruction_pointer)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)STUB_AFTER_SYSCALL, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {.len = sizeof filter / sizeof filter[0], .filter = filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return;
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) return;
  trap_armed = 1;
}
#endif

int statx(int dirfd, const char *path, int flags, unsigned mask, struct statx *buf) {
  long r = syscall(SYS_statx, dirfd, path, flags, mask, buf);
  if (r != 0) return -1; /* errno set by syscall() */
  if (!trap_armed) fix_statx(buf); /* otherwise the SIGSYS handler did */
  return 0;
}

/* ---- set-up ----------------------------------------------------------- */

__attribute__((constructor)) static void repro_setup(void) {
  const char *s = getenv("WEFT_REPRO_SEED");
  if (s && *s) seed = strtoull(s, NULL, 16);
  const char *e = getenv("SOURCE_DATE_EPOCH");
  if (e && *e) epoch = strtoll(e, NULL, 10);
  void *m = mmap(NULL, (size_t)INO_SLOTS * sizeof(struct ino_slot), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m != MAP_FAILED) ino_table = m;
#ifdef REPRO_SECCOMP
  for (int i = 0; i < DIR_SLOTS; i++) dir_copies[i].fd = -1;
  arm_trap();
#endif
  /* WEFT_REPRO_UNSET: the pre-initialiser passes its environment on to the
     guest (wizer --inherit-env), so leave no trace of the shim there. */
  if (getenv("WEFT_REPRO_UNSET")) {
    unsetenv("LD_PRELOAD");
    unsetenv("WEFT_REPRO_SEED");
    unsetenv("SOURCE_DATE_EPOCH");
    unsetenv("WEFT_REPRO_UNSET");
  }
}
