/* Host SymmBuffer backend: windows are POSIX shared-memory files under a
 * rendezvous directory (put it on /dev/shm); every rank maps its peers'
 * windows and a gather is a memcpy from every member's slot.
 * Protocol (docs/SYMM.md): control file with per-rank phase counters,
 * plan files (digest + canonical plan), then window files. Files are made
 * unnamed (O_TMPFILE) and get a name only while peers must find them, so a
 * rank killed before it publishes leaves nothing; names a dead rank leaves
 * are removed by the ranks that survive it. World 1 without a directory
 * uses anonymous memory and touches no file system at all. */
#include "symm_internal.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CTL_MAGIC "MAGICTL1"
#define PLANFILE_MAGIC "MAGIPLAN"
#define CTL_HDR_BYTES 2048u
#define CTL_STRIDE 64u
#define DEFAULT_TIMEOUT_MS 60000u
#define ABORT_CLAIMED 0xffffffffu

typedef struct ctl_hdr {
    char magic[8];
    uint8_t job[32];         /* SHA-256 of the job id */
    uint32_t world;
    uint32_t abort_flag;     /* rank+1 of the first rank that gave up */
    int32_t abort_status;
    char abort_msg[1024];
} ctl_hdr;

typedef struct host_win {
    uint8_t *local;
    size_t map_len;
    uint8_t **peer;          /* group_size entries; peer[my_index] == local */
    char *tmp_name, *pub_name; /* in the rendezvous directory */
    int fd;                  /* the unnamed file until it is published, else -1 */
    int published;           /* pub_name exists and is ours */
    int tmp_exists;          /* tmp_name exists (no O_TMPFILE here) */
} host_win;

typedef struct host_state {
    const magi_symm_plan *plan;
    const magi_symm_group_view *views;
    uint32_t rank, world, timeout_ms;
    char *dir;               /* for messages; files are reached through dirfd */
    int dirfd;               /* the checked private directory; -1: world 1, no files */
    int unnamed;             /* files start unnamed (O_TMPFILE) and are linked to publish */
    dev_t ctl_dev;           /* the control file this rank attached (its identity) */
    ino_t ctl_ino;
    int ctl_ours;            /* the control file is this job's: its files may be reaped */
    uint8_t job[32];         /* SHA-256 of cfg->job_id ("" when none) */
    host_win *wins;
    uint32_t n_windows;
    uint8_t *ctl;
    size_t ctl_len;
    char *plan_name;
    int plan_published;
    uint32_t phase;          /* last barrier phase passed */
    int own_ctl;             /* rank 0 published ctl and has not removed it yet */
    struct timespec start;
} host_state;

static size_t page_round(uint64_t n) {
    long pg = sysconf(_SC_PAGESIZE);
    size_t p = pg > 0 ? (size_t)pg : 4096;
    return (size_t)((n + p - 1) / p * p);
}

static char *path_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *path_fmt(const char *fmt, ...) {
    va_list ap;
    char *s = NULL;
    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0) s = NULL;
    va_end(ap);
    return s;
}

static void host_destroy(void *vs) {
    host_state *s = vs;
    if (!s) return;
    for (uint32_t w = 0; w < s->n_windows && s->wins; w++) {
        host_win *hw = &s->wins[w];
        const magi_symm_group_view *v = &s->views[w];
        if (hw->peer)
            for (uint32_t j = 0; j < v->size; j++)
                if (hw->peer[j] && j != v->my_index) munmap(hw->peer[j], hw->map_len);
        if (hw->local) munmap(hw->local, hw->map_len);
        if (hw->fd >= 0) close(hw->fd);
        if (hw->tmp_exists) unlinkat(s->dirfd, hw->tmp_name, 0);
        if (hw->published) unlinkat(s->dirfd, hw->pub_name, 0);
        free(hw->peer);
        free(hw->tmp_name);
        free(hw->pub_name);
    }
    free(s->wins);
    if (s->plan_published) unlinkat(s->dirfd, s->plan_name, 0);
    free(s->plan_name);
    if (s->ctl) munmap(s->ctl, s->ctl_len);
    if (s->own_ctl) unlinkat(s->dirfd, "ctl", 0); /* rank 0 gave up before the end */
    if (s->dirfd >= 0) close(s->dirfd);
    free(s->dir);
    free(s);
}

/* A new file for `name`: unnamed in the directory (O_TMPFILE; it gets
 * `name` only when published, so a rank killed before that leaves
 * nothing), or where the file system has no O_TMPFILE, `name` itself
 * created exclusively (*named = 1: the caller renames or unlinks it). */
static int create_file(host_state *s, const char *name, int *named) {
#ifdef O_TMPFILE
    if (s->unnamed) {
        int fd = openat(s->dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (fd >= 0) {
            *named = 0;
            return fd;
        }
        if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) return -1;
        s->unnamed = 0; /* this file system has none: named files from now on */
    }
#endif
    *named = 1;
    return openat(s->dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
}

/* Give the unnamed file `fd` the name `name` in the directory; -1 with
 * errno (EEXIST when the name is taken: never replaced). */
static int link_file(host_state *s, int fd, const char *name) {
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    if (linkat(AT_FDCWD, proc, s->dirfd, name, AT_SYMLINK_FOLLOW) == 0) return 0;
    int e = errno;
    if (e != EEXIST && linkat(fd, "", s->dirfd, name, AT_EMPTY_PATH) == 0) return 0;
    errno = e;
    return -1;
}

static magi_status host_create(void **out, const magi_symm_plan *plan,
                               const magi_symm_backend_config *cfg,
                               const magi_symm_group_view *views) {
    magi_status st = MAGI_OK;
    host_state *s = calloc(1, sizeof *s);
    if (!s) return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
    s->plan = plan;
    s->views = views;
    s->dirfd = -1;
    magi_sha256(cfg->job_id ? cfg->job_id : "", cfg->job_id ? strlen(cfg->job_id) : 0, s->job);
    s->rank = cfg->rank;
    s->world = cfg->world;
    s->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : DEFAULT_TIMEOUT_MS;
    if (!cfg->rendezvous || !*cfg->rendezvous) {
        if (cfg->world != 1)
            MAGI_FAIL(MAGI_ERR_INVALID_ARG,
                      "host backend: world %u needs a rendezvous directory shared by the ranks", cfg->world);
        /* World 1 has no peers: anonymous memory, no file anywhere. */
        s->dir = strdup("(world 1: no directory)");
    } else {
        s->dir = strdup(cfg->rendezvous);
    }
    if (!s->dir) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
    if (cfg->rendezvous && *cfg->rendezvous) {
        /* Only a directory of ours that nobody else can enter: another user
         * who pre-created it (or a symlink) could otherwise play rank 0. */
        st = magi_dir_open(s->dir, 1, MAGI_DIR_PRIVATE, &s->dirfd);
        if (st) {
            magi_error_prefix(st, "host backend: rendezvous directory");
            goto cleanup;
        }
        /* Unnamed files need O_TMPFILE and /proc to link them by. */
        s->unnamed = access("/proc/self/fd", X_OK) == 0;
    }
    uint32_t nw;
    const magi_symm_window *win = magi_symm_plan_windows(&nw, plan);
    s->n_windows = nw;
    s->wins = calloc(nw ? nw : 1, sizeof *s->wins);
    if (!s->wins) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
    for (uint32_t w = 0; w < nw; w++) s->wins[w].fd = -1;
    for (uint32_t w = 0; w < nw; w++) {
        host_win *hw = &s->wins[w];
        hw->map_len = page_round(win[w].bytes);
        hw->peer = calloc(views[w].size, sizeof *hw->peer);
        hw->tmp_name = path_fmt(".win%u.r%u.tmp", w, s->rank);
        hw->pub_name = path_fmt("win%u.r%u", w, s->rank);
        if (!hw->peer || !hw->tmp_name || !hw->pub_name) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
        if (win[w].bytes > SIZE_MAX / 2)
            MAGI_FAIL(MAGI_ERR_LIMIT, "host backend: window %u of %llu bytes cannot be mapped", w,
                      (unsigned long long)win[w].bytes);
        if (s->dirfd < 0) {
            void *m = mmap(NULL, hw->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (m == MAP_FAILED)
                MAGI_FAIL(MAGI_ERR_NOMEM, "host backend: cannot allocate window %u (%zu bytes): %s", w,
                          hw->map_len, strerror(errno));
            hw->local = m;
            hw->peer[views[w].my_index] = m;
            continue;
        }
        int named = 0;
        int fd = create_file(s, hw->tmp_name, &named);
        if (fd < 0)
            MAGI_FAIL(errno == EEXIST ? MAGI_ERR_INVALID_ARG : MAGI_ERR_IO,
                      "host backend: cannot create window file '%s/%s': %s%s", s->dir, hw->tmp_name,
                      strerror(errno), errno == EEXIST ? " (the rendezvous directory must be fresh per job)" : "");
        hw->tmp_exists = named;
        hw->fd = named ? -1 : fd;
        /* Reserve the space now: on a full tmpfs a sparse file would map
         * fine and then kill the process with SIGBUS on first touch. */
        int fe = posix_fallocate(fd, 0, (off_t)hw->map_len);
        if (fe != 0) {
            if (named) close(fd);
            MAGI_FAIL(fe == ENOSPC ? MAGI_ERR_NOMEM : MAGI_ERR_IO,
                      "host backend: cannot allocate window '%s/%s' of %zu bytes: %s", s->dir, hw->tmp_name,
                      hw->map_len, strerror(fe));
        }
        void *m = mmap(NULL, hw->map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
        int e = errno;
        if (named) close(fd); /* an unnamed one stays open until it is linked */
        if (m == MAP_FAILED)
            MAGI_FAIL(MAGI_ERR_NOMEM, "host backend: cannot map window '%s/%s' (%zu bytes): %s", s->dir,
                      hw->tmp_name, hw->map_len, strerror(e));
        hw->local = m;
        hw->peer[views[w].my_index] = m;
    }
    *out = s;
    s = NULL;
cleanup:
    host_destroy(s);
    return st;
}

/* ------------------------------------------------------------ control */

static ctl_hdr *ctl_of(host_state *s) { return (ctl_hdr *)s->ctl; }
static uint32_t *phase_of(host_state *s, uint32_t r) {
    return (uint32_t *)(s->ctl + CTL_HDR_BYTES + (size_t)r * CTL_STRIDE);
}

static long elapsed_ms(const host_state *s) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long)((now.tv_sec - s->start.tv_sec) * 1000 + (now.tv_nsec - s->start.tv_nsec) / 1000000);
}

static void nap(unsigned *spins) {
    if (*spins < 200) {
        (*spins)++;
        sched_yield();
        return;
    }
    struct timespec t = {0, *spins < 2000 ? 100000 : 1000000};
    (*spins)++;
    nanosleep(&t, NULL);
}

/* Tell the peers this rank gave up (they fail at their next wait). */
static magi_status host_abort(host_state *s, magi_status st) {
    if (!s->ctl) return st;
    ctl_hdr *h = ctl_of(s);
    uint32_t zero = 0;
    char msg[sizeof h->abort_msg];
    snprintf(msg, sizeof msg, "%s", magi_last_error());
    /* Claim the slot first so two failing ranks never interleave messages;
     * readers ignore the claim marker until the rank is stored. */
    if (__atomic_compare_exchange_n(&h->abort_flag, &zero, ABORT_CLAIMED, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_RELAXED)) {
        memcpy(h->abort_msg, msg, sizeof msg);
        h->abort_status = (int32_t)st;
        __atomic_store_n(&h->abort_flag, s->rank + 1, __ATOMIC_RELEASE);
    }
    return st;
}

static magi_status check_abort(host_state *s) {
    ctl_hdr *h = ctl_of(s);
    uint32_t a = __atomic_load_n(&h->abort_flag, __ATOMIC_ACQUIRE);
    if (!a || a == ABORT_CLAIMED || a == s->rank + 1) return MAGI_OK;
    magi_status st = (magi_status)h->abort_status;
    if (st >= 0 || st < MAGI_STATUS_MIN) st = MAGI_ERR_DEVICE;
    return magi_set_error(st, "rendezvous in '%s': rank %u failed: %.1000s", s->dir, a - 1, h->abort_msg);
}

static magi_status barrier(host_state *s, uint32_t phase, const char *what) {
    s->phase = phase;
    __atomic_store_n(phase_of(s, s->rank), phase, __ATOMIC_RELEASE);
    unsigned spins = 0;
    for (;;) {
        magi_status st = check_abort(s);
        if (st) return st;
        uint32_t missing = 0;
        for (uint32_t r = 0; r < s->world; r++)
            if (__atomic_load_n(phase_of(s, r), __ATOMIC_ACQUIRE) < phase) missing++;
        if (!missing) return MAGI_OK;
        if (elapsed_ms(s) > (long)s->timeout_ms) {
            char list[512];
            size_t o = 0;
            list[0] = '\0';
            for (uint32_t r = 0; r < s->world && o < sizeof list - 16; r++)
                if (__atomic_load_n(phase_of(s, r), __ATOMIC_ACQUIRE) < phase)
                    o += (size_t)snprintf(list + o, sizeof list - o, "%s%u", o ? ", " : "", r);
            magi_set_error(MAGI_ERR_TIMEOUT,
                           "rendezvous in '%s' timed out after %u ms at step '%s': rank(s) %s did not arrive",
                           s->dir, s->timeout_ms, what, list);
            return host_abort(s, MAGI_ERR_TIMEOUT);
        }
        nap(&spins);
    }
}

static magi_status attach_ctl(host_state *s) {
    magi_status st = MAGI_OK;
    char *path = path_fmt("%s/ctl", s->dir);
    char *tmp = path_fmt("%s/.ctl.tmp", s->dir);
    int fd = -1;
    size_t len = CTL_HDR_BYTES + (size_t)s->world * CTL_STRIDE;
    if (!path || !tmp) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
    if (s->rank == 0) {
        int named = 0;
        fd = create_file(s, ".ctl.tmp", &named);
        if (fd < 0)
            MAGI_FAIL(MAGI_ERR_IO, "rendezvous: cannot create '%s': %s%s", tmp, strerror(errno),
                      errno == EEXIST ? " (the rendezvous directory must be fresh per job)" : "");
        int fe = posix_fallocate(fd, 0, (off_t)len);
        if (fe != 0) {
            if (named) unlinkat(s->dirfd, ".ctl.tmp", 0);
            MAGI_FAIL(fe == ENOSPC ? MAGI_ERR_NOMEM : MAGI_ERR_IO, "rendezvous: cannot allocate '%s' (%zu bytes): %s",
                      tmp, len, strerror(fe));
        }
        void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) {
            if (named) unlinkat(s->dirfd, ".ctl.tmp", 0);
            MAGI_FAIL(MAGI_ERR_IO, "rendezvous: cannot map '%s': %s", tmp, strerror(errno));
        }
        s->ctl = m;
        s->ctl_len = len;
        ctl_hdr *h = ctl_of(s);
        memcpy(h->magic, CTL_MAGIC, 8);
        memcpy(h->job, s->job, 32);
        h->world = s->world;
        struct stat sb;
        if (fstat(fd, &sb) == 0) {
            s->ctl_dev = sb.st_dev;
            s->ctl_ino = sb.st_ino;
        }
        /* Complete before it is visible: linked (or, named, hard-linked
         * from its temporary) under "ctl", never replacing one. */
        int lk = named ? linkat(s->dirfd, ".ctl.tmp", s->dirfd, "ctl", 0) : link_file(s, fd, "ctl");
        int e = errno;
        if (named) unlinkat(s->dirfd, ".ctl.tmp", 0);
        if (lk != 0)
            MAGI_FAIL(e == EEXIST ? MAGI_ERR_INVALID_ARG : MAGI_ERR_IO,
                      "rendezvous: cannot publish '%s': %s%s", path, strerror(e),
                      e == EEXIST ? " (the rendezvous directory must be fresh per job)" : "");
        s->own_ctl = 1;
        s->ctl_ours = 1;
    } else {
        unsigned spins = 0;
        for (;;) {
            fd = openat(s->dirfd, "ctl", O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
            if (fd >= 0) break;
            if (errno != ENOENT) MAGI_FAIL(MAGI_ERR_IO, "rendezvous: cannot open '%s': %s", path, strerror(errno));
            if (elapsed_ms(s) > (long)s->timeout_ms)
                MAGI_FAIL(MAGI_ERR_TIMEOUT,
                          "rendezvous in '%s' timed out after %u ms: rank 0 did not create '%s'", s->dir,
                          s->timeout_ms, path);
            nap(&spins);
        }
        struct stat sb;
        if (fstat(fd, &sb) != 0) MAGI_FAIL(MAGI_ERR_IO, "rendezvous: stat '%s': %s", path, strerror(errno));
        if (!S_ISREG(sb.st_mode)) MAGI_FAIL(MAGI_ERR_CORRUPT, "rendezvous: '%s' is not a regular file", path);
        s->ctl_dev = sb.st_dev;
        s->ctl_ino = sb.st_ino;
        if ((size_t)sb.st_size < CTL_HDR_BYTES)
            MAGI_FAIL(MAGI_ERR_CORRUPT, "rendezvous: '%s' is truncated", path);
        size_t have = (size_t)sb.st_size;
        void *m = mmap(NULL, have, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) MAGI_FAIL(MAGI_ERR_IO, "rendezvous: cannot map '%s': %s", path, strerror(errno));
        s->ctl = m;
        s->ctl_len = have;
        ctl_hdr *h = ctl_of(s);
        if (memcmp(h->magic, CTL_MAGIC, 8)) MAGI_FAIL(MAGI_ERR_CORRUPT, "rendezvous: '%s' is not a control file", path);
        if (memcmp(h->job, s->job, 32)) {
            /* Another job's rendezvous: never pair with it, never abort it. */
            munmap(s->ctl, s->ctl_len);
            s->ctl = NULL;
            MAGI_FAIL(MAGI_ERR_MISMATCH,
                      "rendezvous in '%s': the control file belongs to another job (different job id): "
                      "use a fresh directory per job",
                      s->dir);
        }
        s->ctl_ours = 1;
        if (h->world != s->world || have != len) {
            magi_set_error(MAGI_ERR_MISMATCH, "rendezvous in '%s': rank %u has world %u but rank 0 has world %u",
                           s->dir, s->rank, s->world, h->world);
            st = MAGI_ERR_MISMATCH;
            if (have >= len) host_abort(s, st);
            goto cleanup;
        }
    }
cleanup:
    if (fd >= 0) close(fd);
    free(path);
    free(tmp);
    return st;
}

/* ------------------------------------------------------------ plan files */

static magi_status publish_plan(host_state *s) {
    magi_status st = MAGI_OK;
    void *enc = NULL;
    size_t len = 0;
    char *tmp = NULL;
    int fd = -1, tmp_named = 0;
    magi_buf b = {0};
    uint8_t sha[32];
    MAGI_CHECK(magi_symm_plan_encode(&enc, &len, s->plan));
    magi_sha256(enc, len, sha);
    uint32_t hdr[2] = {s->world, s->rank};
    uint64_t l64 = len;
    magi_buf_append(&b, PLANFILE_MAGIC, 8);
    magi_buf_append(&b, s->job, 32);
    magi_buf_append(&b, hdr, sizeof hdr);
    magi_buf_append(&b, sha, 32);
    magi_buf_append(&b, &l64, 8);
    magi_buf_append(&b, enc, len);
    if (b.failed) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
    s->plan_name = path_fmt("plan.r%u", s->rank);
    tmp = path_fmt(".plan.r%u.tmp", s->rank);
    if (!s->plan_name || !tmp) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
    int named = 0;
    fd = create_file(s, tmp, &named);
    if (fd < 0) MAGI_FAIL(MAGI_ERR_IO, "rendezvous: cannot create '%s/%s': %s", s->dir, tmp, strerror(errno));
    tmp_named = named;
    size_t off = 0;
    while (off < b.len) {
        ssize_t w = write(fd, b.data + off, b.len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) MAGI_FAIL(MAGI_ERR_IO, "rendezvous: cannot write '%s/%s': %s", s->dir, tmp, strerror(errno));
        off += (size_t)w;
    }
    if (named ? renameat(s->dirfd, tmp, s->dirfd, s->plan_name) != 0 : link_file(s, fd, s->plan_name) != 0)
        MAGI_FAIL(MAGI_ERR_IO, "rendezvous: cannot publish '%s/%s': %s%s", s->dir, s->plan_name, strerror(errno),
                  errno == EEXIST ? " (the rendezvous directory must be fresh per job)" : "");
    tmp_named = 0;
    s->plan_published = 1;
cleanup:
    if (fd >= 0) close(fd);
    if (tmp_named) unlinkat(s->dirfd, tmp, 0); /* a failed write or rename leaves no temporary */
    free(tmp);
    free(enc);
    magi_buf_free(&b);
    return st;
}

/* Read the regular file `name` in the directory dirfd (not following a
 * symlink, never blocking on a FIFO); `path` names it in messages. */
static magi_status read_at(int dirfd, const char *name, const char *path, size_t max, char **out, size_t *len) {
    magi_status st = MAGI_OK;
    char *buf = NULL;
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return magi_set_error(MAGI_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) MAGI_FAIL(MAGI_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode)) MAGI_FAIL(MAGI_ERR_CORRUPT, "%s: not a regular file", path);
    if ((uint64_t)sb.st_size > max) MAGI_FAIL(MAGI_ERR_LIMIT, "%s: %lld bytes is too large", path, (long long)sb.st_size);
    size_t n = (size_t)sb.st_size, got = 0;
    buf = malloc(n + 1);
    if (!buf) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
    while (got < n) {
        ssize_t r = pread(fd, buf + got, n - got, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) MAGI_FAIL(MAGI_ERR_IO, "%s: short read", path);
        got += (size_t)r;
    }
    buf[n] = 0;
    *out = buf;
    *len = n;
    buf = NULL;
cleanup:
    free(buf);
    close(fd);
    return st;
}

/* Read rank q's plan file; *enc points into *buf. */
static magi_status read_plan(host_state *s, uint32_t q, char **buf, const uint8_t **enc, size_t *len,
                             uint8_t sha[32]) {
    magi_status st;
    char *path = path_fmt("%s/plan.r%u", s->dir, q), name[32];
    size_t n = 0;
    if (!path) return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
    snprintf(name, sizeof name, "plan.r%u", q);
    st = read_at(s->dirfd, name, path, 1ull << 30, buf, &n);
    if (st) {
        magi_error_prefix(st, "rendezvous: plan of rank %u", q);
        free(path);
        return st;
    }
    const uint8_t *p = (const uint8_t *)*buf;
    uint32_t hdr[2];
    uint64_t l64;
    if (n < 8 + 32 + 8 + 32 + 8 || memcmp(p, PLANFILE_MAGIC, 8)) {
        st = magi_set_error(MAGI_ERR_CORRUPT, "rendezvous: '%s' is not a plan file", path);
        goto done;
    }
    if (memcmp(p + 8, s->job, 32)) {
        st = magi_set_error(MAGI_ERR_MISMATCH, "rendezvous: '%s' belongs to another job (different job id)", path);
        goto done;
    }
    p += 32;
    n -= 32;
    memcpy(hdr, p + 8, 8);
    memcpy(sha, p + 16, 32);
    memcpy(&l64, p + 48, 8);
    if (l64 != n - 56) {
        st = magi_set_error(MAGI_ERR_CORRUPT, "rendezvous: '%s' is truncated", path);
        goto done;
    }
    if (hdr[1] != q || hdr[0] != s->world) {
        st = magi_set_error(MAGI_ERR_MISMATCH, "rendezvous: '%s' says rank %u of world %u (expected rank %u of %u)",
                            path, hdr[1], hdr[0], q, s->world);
        goto done;
    }
    uint8_t check[32];
    magi_sha256(p + 56, (size_t)l64, check);
    if (memcmp(check, sha, 32)) {
        st = magi_set_error(MAGI_ERR_DIGEST, "rendezvous: '%s': plan digest does not match its plan", path);
        goto done;
    }
    *enc = p + 56;
    *len = (size_t)l64;
    st = MAGI_OK;
done:
    free(path);
    return st;
}

/* Compare every rank's plan with rank 0's; the same verdict on every rank. */
static magi_status check_plans(host_state *s) {
    magi_status st = MAGI_OK;
    char *b0 = NULL, *bq = NULL;
    const uint8_t *e0, *eq;
    size_t l0, lq;
    uint8_t h0[32], hq[32];
    MAGI_CHECK(read_plan(s, 0, &b0, &e0, &l0, h0));
    for (uint32_t q = 1; q < s->world; q++) {
        free(bq);
        bq = NULL;
        MAGI_CHECK(read_plan(s, q, &bq, &eq, &lq, hq));
        if (!memcmp(h0, hq, 32)) continue;
        char d0[17], dq[17];
        magi_hex(d0, h0, 8);
        magi_hex(dq, hq, 8);
        st = magi_symm_plan_compare(e0, l0, eq, lq);
        if (st == MAGI_OK) st = magi_set_error(MAGI_ERR_MISMATCH, "digests differ");
        magi_error_prefix(MAGI_ERR_MISMATCH,
                          "rank %u planned different windows than rank 0 (plan %s... vs %s...): rank 0 vs rank %u",
                          q, d0, dq, q);
        st = MAGI_ERR_MISMATCH;
        goto cleanup;
    }
cleanup:
    free(b0);
    free(bq);
    return st;
}

/* --------------------------------------------------------- rendezvous */

static magi_status map_peers(host_state *s) {
    for (uint32_t w = 0; w < s->n_windows; w++) {
        host_win *hw = &s->wins[w];
        const magi_symm_group_view *v = &s->views[w];
        for (uint32_t j = 0; j < v->size; j++) {
            if (j == v->my_index) continue;
            char *path = path_fmt("%s/win%u.r%u", s->dir, w, v->ranks[j]), name[48];
            if (!path) return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
            snprintf(name, sizeof name, "win%u.r%u", w, v->ranks[j]);
            int fd = openat(s->dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
            if (fd < 0) {
                magi_set_error(MAGI_ERR_IO, "rendezvous: cannot open peer window '%s': %s", path, strerror(errno));
                free(path);
                return MAGI_ERR_IO;
            }
            struct stat sb;
            memset(&sb, 0, sizeof sb); /* the message reads st_size even if fstat fails */
            if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || (size_t)sb.st_size != hw->map_len) {
                close(fd);
                magi_set_error(MAGI_ERR_MISMATCH, "rendezvous: peer window '%s' has %lld bytes, expected %zu",
                               path, (long long)sb.st_size, hw->map_len);
                free(path);
                return MAGI_ERR_MISMATCH;
            }
            void *m = mmap(NULL, hw->map_len, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
            int e = errno;
            close(fd);
            if (m == MAP_FAILED) {
                magi_set_error(MAGI_ERR_NOMEM, "rendezvous: cannot map peer window '%s': %s", path, strerror(e));
                free(path);
                return MAGI_ERR_NOMEM;
            }
            free(path);
            hw->peer[j] = m;
        }
    }
    return MAGI_OK;
}

/* ------------------------------------------------------------ cleanup */

static void unlink_fmt(host_state *s, const char *fmt, uint32_t a, uint32_t b) {
    char name[64];
    snprintf(name, sizeof name, fmt, a, b);
    unlinkat(s->dirfd, name, 0);
}

/* "ctl" (or rank 0's temporary of it) is removed only while it is still the
 * control file this rank attached: never another job's. */
static void unlink_ctl_if_ours(host_state *s, const char *name) {
    struct stat sb;
    if (fstatat(s->dirfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && sb.st_dev == s->ctl_dev &&
        sb.st_ino == s->ctl_ino)
        unlinkat(s->dirfd, name, 0);
}

/* Does the plan file `name` carry this job's id? */
static int plan_is_ours(host_state *s, const char *name) {
    uint8_t head[40];
    int fd = openat(s->dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = pread(fd, head, sizeof head, 0);
    close(fd);
    return n == (ssize_t)sizeof head && !memcmp(head, PLANFILE_MAGIC, 8) && !memcmp(head + 8, s->job, 32);
}

/* Is `name` exactly the name fmt makes of two numbers in range? */
static int name_is(const char *name, const char *fmt, uint32_t na, uint32_t nb) {
    unsigned a = 0, b = 0;
    char again[64];
    int k = sscanf(name, fmt, &a, &b);
    if (k < 1 || a >= na || (k == 2 && b >= nb)) return 0;
    if (k == 2) snprintf(again, sizeof again, fmt, a, b);
    else snprintf(again, sizeof again, fmt, a);
    return strcmp(again, name) == 0;
}

/* After a failure, remove every name this job's ranks left in the
 * directory: a rank killed while its files had names (plan, windows, rank
 * 0's control file) cannot remove them itself. Only a rank that attached
 * this job's control file reaps (the directory is then this job's); plan
 * files are checked for the job id, the control file by identity. */
static void reap_job(host_state *s) {
    if (s->dirfd < 0 || !s->ctl_ours) return;
    int fd = openat(s->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0) close(fd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        if (!strcmp(n, "ctl") || !strcmp(n, ".ctl.tmp")) unlink_ctl_if_ours(s, n);
        else if (name_is(n, "win%u.r%u", s->n_windows, s->world) || name_is(n, ".win%u.r%u.tmp", s->n_windows, s->world))
            unlinkat(s->dirfd, n, 0);
        else if ((name_is(n, "plan.r%u", s->world, 0) || name_is(n, ".plan.r%u.tmp", s->world, 0)) && plan_is_ours(s, n))
            unlinkat(s->dirfd, n, 0);
    }
    closedir(d);
}

/* --------------------------------------------------------- rendezvous */

static magi_status host_rendezvous(void *vs) {
    host_state *s = vs;
    magi_status st = MAGI_OK;
    if (s->dirfd < 0) return MAGI_OK; /* world 1: nobody to meet */
    clock_gettime(CLOCK_MONOTONIC, &s->start);
    const uint32_t next = (s->rank + 1) % s->world;
    MAGI_CHECK(attach_ctl(s));
    st = publish_plan(s);
    if (st) goto fail;
    if ((st = barrier(s, 1, "plans published"))) goto cleanup;
    magi_status verdict = check_plans(s);
    if (verdict && verdict != MAGI_ERR_MISMATCH) {
        st = verdict;
        goto fail;
    }
    char keep[2048];
    snprintf(keep, sizeof keep, "%s", magi_last_error());
    /* Everyone has read every plan file past this point: each rank removes
     * its own and its successor's (in case that one died just now). */
    if ((st = barrier(s, 2, "plans checked"))) goto cleanup;
    unlinkat(s->dirfd, s->plan_name, 0);
    s->plan_published = 0;
    unlink_fmt(s, "plan.r%u", next, 0);
    if (verdict) {
        if (s->own_ctl) unlinkat(s->dirfd, "ctl", 0);
        s->own_ctl = 0;
        st = magi_set_error(verdict, "%s", keep);
        goto cleanup;
    }
    for (uint32_t w = 0; w < s->n_windows; w++) {
        host_win *hw = &s->wins[w];
        int rc = hw->fd >= 0 ? link_file(s, hw->fd, hw->pub_name)
                             : renameat(s->dirfd, hw->tmp_name, s->dirfd, hw->pub_name);
        if (rc != 0) {
            st = magi_set_error(MAGI_ERR_IO, "rendezvous: cannot publish window '%s/%s': %s%s", s->dir,
                                hw->pub_name, strerror(errno),
                                errno == EEXIST ? " (the rendezvous directory must be fresh per job)" : "");
            goto fail;
        }
        if (hw->fd >= 0) close(hw->fd);
        hw->fd = -1;
        hw->tmp_exists = 0;
        hw->published = 1;
    }
    if ((st = barrier(s, 3, "windows published"))) goto cleanup;
    if ((st = map_peers(s))) goto fail;
    if ((st = barrier(s, 4, "windows mapped"))) goto cleanup;
    /* Everyone has mapped everything: no name is needed any more. Each rank
     * removes its windows, its group peers' and its successor's, and the
     * control file, so a rank killed right here leaves nothing unless all
     * of those died with it. */
    for (uint32_t w = 0; w < s->n_windows; w++) {
        const magi_symm_group_view *v = &s->views[w];
        unlinkat(s->dirfd, s->wins[w].pub_name, 0);
        s->wins[w].published = 0;
        for (uint32_t j = 0; j < v->size; j++)
            if (j != v->my_index) unlink_fmt(s, "win%u.r%u", w, v->ranks[j]);
        unlink_fmt(s, "win%u.r%u", w, next);
    }
    if (s->own_ctl) unlinkat(s->dirfd, "ctl", 0);
    else unlink_ctl_if_ours(s, "ctl");
    s->own_ctl = 0;
    return MAGI_OK;
fail:
    /* A peer that gave up first explains this failure better (it may have
     * removed the files this rank then missed). */
    if (s->ctl) {
        magi_status peer = check_abort(s);
        if (peer != MAGI_OK) st = peer;
        else host_abort(s, st);
    }
cleanup:
    /* Window files are never needed again after a failure: peers fail too. */
    for (uint32_t w = 0; w < s->n_windows; w++) {
        host_win *hw = &s->wins[w];
        if (hw->tmp_exists) unlinkat(s->dirfd, hw->tmp_name, 0);
        if (hw->published) unlinkat(s->dirfd, hw->pub_name, 0);
        hw->tmp_exists = hw->published = 0;
    }
    /* A rank 0 that gave up (timeout, mismatch) removes its control file:
     * ranks still attached keep their mapping and see the abort slot. */
    if (s->own_ctl) unlinkat(s->dirfd, "ctl", 0);
    s->own_ctl = 0;
    /* And what ranks that died left behind. */
    if (s->plan_published) unlinkat(s->dirfd, s->plan_name, 0);
    s->plan_published = 0;
    reap_job(s);
    return st;
}

/* ------------------------------------------------------------- data path */

static magi_status host_barrier(void *vs, void *stream) {
    host_state *s = vs;
    if (s->dirfd < 0) return MAGI_OK; /* world 1 */
    clock_gettime(CLOCK_MONOTONIC, &s->start);
    return barrier(s, s->phase + 1, "barrier");
}

static magi_status host_local_slot_ptr(void *vs, uint32_t slot, void **out) {
    host_state *s = vs;
    uint32_t ns;
    const magi_symm_slot *sl = &magi_symm_plan_slots(&ns, s->plan)[slot];
    *out = s->wins[sl->window].local + sl->offset;
    return MAGI_OK;
}

static magi_status host_bind(void *vs, uint32_t slot, const void *src, uint64_t nbytes, void *stream) {
    void *p;
    host_local_slot_ptr(vs, slot, &p);
    memcpy(p, src, (size_t)nbytes);
    return MAGI_OK;
}

static magi_status host_gather(void *vs, uint32_t slot, void *dst, void *stream) {
    host_state *s = vs;
    uint32_t ns;
    const magi_symm_slot *sl = &magi_symm_plan_slots(&ns, s->plan)[slot];
    const host_win *hw = &s->wins[sl->window];
    const magi_symm_group_view *v = &s->views[sl->window];
    uint8_t *d = dst;
    for (uint32_t j = 0; j < v->size; j++)
        memcpy(d + (size_t)j * sl->nbytes, hw->peer[j] + sl->offset, (size_t)sl->nbytes);
    return MAGI_OK;
}

static magi_status host_gather_coalesced(void *vs, uint32_t n, const uint32_t *slots,
                                         void *const *dsts, void *stream) {
    for (uint32_t i = 0; i < n; i++) host_gather(vs, slots[i], dsts[i], stream);
    return MAGI_OK;
}

const magi_symm_backend_ops magi_symm_host_ops = {
    MAGI_SYMM_BACKEND_OPS_VERSION, "host", host_create, host_rendezvous, host_barrier, host_bind, host_local_slot_ptr,
    host_gather, host_gather_coalesced, host_destroy,
};
