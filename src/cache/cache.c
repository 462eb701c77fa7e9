/* Cross-process artifact cache in a directory (protocol: docs/CACHE.md).
 *
 * Everything that matters lives in the directory; the handle holds only
 * paths. Publication relies on three POSIX properties: link(2) fails with
 * EEXIST instead of replacing (first publish wins), rename(2) replaces
 * atomically (REPLACE), and an open file keeps its inode alive when its
 * name is removed (a reader racing gc or a replacement reads a complete,
 * consistent entry). Writers lock their temporary with flock(2), so gc can
 * tell a dead writer's leftovers from a live one's work in progress. */
#include "cache_internal.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Entry file: fixed header, the key, then the content.
 *   0  magic "MAGICENT"
 *   8  u32 LE format version (1)
 *  12  u32 LE key length
 *  16  u64 LE content length
 *  24  32 bytes SHA-256 of the content
 *  56  key bytes, then content */
#define ENTRY_MAGIC MAGI_CACHE_ENTRY_MAGIC
#define ENTRY_VERSION 1u
#define ENTRY_FIXED 56u
#define IO_CHUNK (1u << 20)
#define DEFAULT_MAX_GET (1ull << 30)
/* Largest entry content: artifacts hold metadata only. A bigger entry
 * (a sparse 64 GiB file, say) is never hashed, it is corrupt. */
#define ENTRY_MAX_CONTENT (1ull << 30)

/* Paths are kept for messages only: every file operation goes through a
 * directory descriptor opened without following symlinks and checked
 * (magi_dir_open: ours or group-shared, never other-writable), so a
 * symlink planted inside the cache can never send gc or verify elsewhere. */
struct magi_cache {
    char *dir;        /* DIR */
    char *root;       /* DIR/v1 */
    char *entries;    /* DIR/v1/entries */
    char *tmp;        /* DIR/v1/tmp */
    char *quarantine; /* DIR/v1/quarantine */
    int dir_fd, root_fd, entries_fd, tmp_fd, q_fd;
};

/* ---- small helpers ---- */

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_u32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static uint64_t get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static char *path_join(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b), n;
    if (!magi_add_ok(la, lb, &n) || !magi_add_ok(n, 2, &n)) return NULL;
    char *p = malloc(n);
    if (!p) return NULL;
    memcpy(p, a, la);
    p[la] = '/';
    memcpy(p + la + 1, b, lb + 1);
    return p;
}

static int64_t ts_ns(struct timespec t) { return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec; }

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return ts_ns(t);
}

static int fsync_dir(int fd) { return fsync(fd); }

static int mkdir_one(const char *path) {
    if (mkdir(path, 0755) == 0 || errno == EEXIST) {
        struct stat sb;
        if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) return 0;
        errno = ENOTDIR;
    }
    return -1;
}

/* mkdir -p; each component may be created concurrently by another process. */
static int mkdir_p(const char *path) {
    char *p = strdup(path);
    if (!p) return -1;
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = '\0';
        if (mkdir_one(p) != 0) { free(p); return -1; }
        *s = '/';
    }
    int r = mkdir_one(p);
    free(p);
    return r;
}

/* Open for reading without touching the access time when we may (the
 * access time is our LRU clock; only get sets it, explicitly). */
static int open_noatime(int dirfd, const char *name) {
    /* O_NONBLOCK: opening a FIFO planted in the cache must not hang. */
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOATIME);
    if (fd < 0 && errno == EPERM) fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    return fd;
}

static int read_full(int fd, void *buf, size_t n, uint64_t off) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        got += (size_t)r;
    }
    return 0;
}

static int write_full(int fd, const void *buf, size_t n, uint64_t off) {
    size_t put = 0;
    while (put < n) {
        ssize_t r = pwrite(fd, (const char *)buf + put, n - put, (off_t)(off + put));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        put += (size_t)r;
    }
    return 0;
}

magi_status magi_cache_key_check(const char *key) {
    MAGI_ARG_NONNULL(key);
    if (!*key) return magi_set_error(MAGI_ERR_INVALID_ARG, "cache key is empty");
    size_t n = strlen(key);
    if (n > MAGI_CACHE_KEY_MAX)
        return magi_set_error(MAGI_ERR_INVALID_ARG, "cache key is %zu characters (at most %d)", n,
                              MAGI_CACHE_KEY_MAX);
    if (key[0] == '.')
        return magi_set_error(MAGI_ERR_INVALID_ARG, "cache key '%s' starts with '.'", key);
    for (size_t i = 0; i < n; i++) {
        char ch = key[i];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 ch == '.' || ch == '_' || ch == '-';
        if (!ok)
            return magi_set_error(MAGI_ERR_INVALID_ARG,
                                  "cache key has character 0x%02x at %zu (allowed: A-Z a-z 0-9 . _ -)",
                                  (unsigned char)ch, i);
    }
    return MAGI_OK;
}

/* ---- open / free ---- */

static magi_status cache_open(magi_cache **out, const char *dir, int create) {
    magi_status st = MAGI_OK;
    magi_cache *c = NULL;
    if (!out || !dir || !*dir) return magi_set_error(MAGI_ERR_INVALID_ARG, "cache: no directory");
    *out = NULL;
    c = calloc(1, sizeof *c);
    if (!c) return magi_set_error(MAGI_ERR_NOMEM, "cache: out of memory");
    c->dir_fd = c->root_fd = c->entries_fd = c->tmp_fd = c->q_fd = -1;
    c->dir = strdup(dir);
    c->root = path_join(dir, "v1");
    if (c->root) c->entries = path_join(c->root, "entries");
    if (c->root) c->tmp = path_join(c->root, "tmp");
    if (c->root) c->quarantine = path_join(c->root, "quarantine");
    if (!c->dir || !c->root || !c->entries || !c->tmp || !c->quarantine)
        MAGI_FAIL(MAGI_ERR_NOMEM, "cache: out of memory");
    if (create && mkdir_p(dir) != 0)
        MAGI_FAIL(MAGI_ERR_IO, "cache %s: cannot create it: %s", dir, strerror(errno));
    /* The root must be a real directory (not a symlink), ours or
     * group-shared (g+ws), never writable by everyone. */
    int top = -1;
    st = magi_dir_open(dir, 0, MAGI_DIR_SHARED, &top);
    if (st) {
        /* said once: the message of magi_dir_open names the path again */
        if (st == MAGI_ERR_NOT_FOUND) magi_set_error(st, "cache %s: no cache here (no such directory)", dir);
        else magi_error_prefix(st, "cache");
        goto cleanup;
    }
    struct stat tsb;
    int shared = fstat(top, &tsb) == 0 && (tsb.st_mode & 020) && (tsb.st_mode & S_ISGID);
    st = magi_dir_open_at(top, "v1", c->root, create, MAGI_DIR_SHARED, &c->root_fd);
    c->dir_fd = top; /* kept: magi_cache_check_owner() checks the directory opened here */
    const char *names[] = {"entries", "tmp", "quarantine"};
    const char *paths[] = {c->entries, c->tmp, c->quarantine};
    int *fds[] = {&c->entries_fd, &c->tmp_fd, &c->q_fd};
    const char *missing = st == MAGI_ERR_NOT_FOUND ? "v1/" : NULL;
    for (int i = 0; i < 3 && !st; i++) {
        st = magi_dir_open_at(c->root_fd, names[i], paths[i], create, MAGI_DIR_SHARED, fds[i]);
        if (st == MAGI_ERR_NOT_FOUND) missing = names[i];
    }
    if (st) {
        if (st == MAGI_ERR_NOT_FOUND)
            magi_set_error(st, "cache %s: no cache here (no %s%s in it)", dir, strcmp(missing, "v1/") ? "v1/" : "",
                           missing);
        else magi_error_prefix(st, "cache");
        goto cleanup;
    }
    if (shared) { /* a group-shared cache: its folders are group-writable too */
        int all[] = {c->root_fd, c->entries_fd, c->tmp_fd, c->q_fd};
        for (int i = 0; i < 4; i++) {
            struct stat sb;
            if (fstat(all[i], &sb) == 0 && sb.st_uid == geteuid())
                fchmod(all[i], (tsb.st_mode & 07775) | S_ISGID);
        }
    }
    *out = c;
    c = NULL;
cleanup:
    magi_cache_free(c);
    return st;
}

magi_status magi_cache_open(magi_cache **out, const char *dir) {
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    MAGI_ARG_NONNULL(dir);
    return cache_open(out, dir, 1);
}

magi_status magi_cache_open_existing(magi_cache **out, const char *dir) {
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    MAGI_ARG_NONNULL(dir);
    return cache_open(out, dir, 0);
}

void magi_cache_free(magi_cache *c) {
    if (!c) return;
    int fds[] = {c->dir_fd, c->root_fd, c->entries_fd, c->tmp_fd, c->q_fd};
    for (int i = 0; i < 5; i++)
        if (fds[i] >= 0) close(fds[i]);
    free(c->dir);
    free(c->root);
    free(c->entries);
    free(c->tmp);
    free(c->quarantine);
    free(c);
}

/* ---- reading and checking one entry ---- */

typedef struct entry_head {
    uint64_t len;
    uint8_t sha[32];
    uint64_t data_off;
} entry_head;

/* Check the header of the entry open on fd against its name. Returns 0 or
 * -1 with a reason in why[]. */
static int head_read(int fd, const char *key, entry_head *h, struct stat *sb, char *why, size_t whycap) {
    uint8_t fixed[ENTRY_FIXED];
    char kbuf[MAGI_CACHE_KEY_MAX + 1];
    if (fstat(fd, sb) != 0) { snprintf(why, whycap, "cannot stat: %s", strerror(errno)); return -1; }
    if (!S_ISREG(sb->st_mode)) { snprintf(why, whycap, "not a regular file"); return -1; }
    if ((uint64_t)sb->st_size < ENTRY_FIXED) { snprintf(why, whycap, "truncated header (%lld bytes)", (long long)sb->st_size); return -1; }
    if (read_full(fd, fixed, sizeof fixed, 0) != 0) { snprintf(why, whycap, "cannot read header"); return -1; }
    if (memcmp(fixed, ENTRY_MAGIC, 8) != 0) { snprintf(why, whycap, "bad magic"); return -1; }
    uint32_t ver = get_u32(fixed + 8), klen = get_u32(fixed + 12);
    if (ver != ENTRY_VERSION) { snprintf(why, whycap, "entry format version %u (this build reads %u)", ver, ENTRY_VERSION); return -1; }
    size_t want = strlen(key);
    if (klen != want) { snprintf(why, whycap, "header key length %u does not match the file name", klen); return -1; }
    if (read_full(fd, kbuf, klen, ENTRY_FIXED) != 0) { snprintf(why, whycap, "cannot read key"); return -1; }
    if (memcmp(kbuf, key, klen) != 0) { snprintf(why, whycap, "header key does not match the file name"); return -1; }
    h->len = get_u64(fixed + 16);
    memcpy(h->sha, fixed + 24, 32);
    h->data_off = ENTRY_FIXED + (uint64_t)klen;
    if (h->len > ENTRY_MAX_CONTENT) {
        snprintf(why, whycap, "content of %llu bytes exceeds the entry limit of %llu",
                 (unsigned long long)h->len, (unsigned long long)ENTRY_MAX_CONTENT);
        return -1;
    }
    if (h->len > UINT64_MAX - h->data_off || h->data_off + h->len != (uint64_t)sb->st_size) {
        snprintf(why, whycap, "size %lld does not match header (%llu content bytes)",
                 (long long)sb->st_size, (unsigned long long)h->len);
        return -1;
    }
    return 0;
}

/* Hash the content (streamed, or into buf when not NULL) and compare. */
static int body_check(int fd, const entry_head *h, uint8_t *buf, char *why, size_t whycap) {
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    uint8_t *chunk = NULL, got[32];
    unsigned int glen = 32;
    int rc = -1;
    if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL)) { snprintf(why, whycap, "sha256 init failed"); goto done; }
    if (!buf && !(chunk = malloc(IO_CHUNK))) { snprintf(why, whycap, "out of memory"); goto done; }
    for (uint64_t off = 0; off < h->len;) {
        size_t n = h->len - off > IO_CHUNK ? IO_CHUNK : (size_t)(h->len - off);
        uint8_t *dst = buf ? buf + off : chunk;
        if (read_full(fd, dst, n, h->data_off + off) != 0) { snprintf(why, whycap, "short read of content"); goto done; }
        EVP_DigestUpdate(md, dst, n);
        off += n;
    }
    EVP_DigestFinal_ex(md, got, &glen);
    if (memcmp(got, h->sha, 32) != 0) {
        char a[65], b[65];
        magi_hex(a, h->sha, 32);
        magi_hex(b, got, 32);
        snprintf(why, whycap, "content SHA-256 %s does not match the recorded %s", b, a);
        goto done;
    }
    rc = 0;
done:
    free(chunk);
    EVP_MD_CTX_free(md);
    return rc;
}

/* Move the entry `key`, which fd was found corrupt on, into quarantine/.
 * Returns 1 when a corrupt file was moved aside, 0 when there was nothing to
 * move (already moved, or replaced by a valid entry meanwhile). `where`
 * receives the quarantine path. */
static int quarantine_entry(magi_cache *c, const char *key, int fd, char *where, size_t wcap) {
    struct stat bad, moved;
    if (fstat(fd, &bad) != 0) return 0;
    char name[MAGI_CACHE_KEY_MAX + 64];
    snprintf(name, sizeof name, "%s.%ld.%lld.bad", key, (long)getpid(), (long long)now_ns());
    char *dst = path_join(c->quarantine, name);
    int result = 0;
    if (!dst) goto done;
    if (renameat(c->entries_fd, key, c->q_fd, name) != 0) goto done; /* ENOENT: someone else moved it */
    snprintf(where, wcap, "%s", dst);
    result = 1;
    if (fstatat(c->q_fd, name, &moved, AT_SYMLINK_NOFOLLOW) == 0 &&
        (moved.st_ino != bad.st_ino || moved.st_dev != bad.st_dev)) {
        /* Between our check and the rename another process replaced the
         * corrupt file with a fresh entry; if that one is valid, put it back. */
        int qfd = open_noatime(c->q_fd, name);
        entry_head h;
        struct stat sb;
        char why[256];
        if (qfd >= 0 && head_read(qfd, key, &h, &sb, why, sizeof why) == 0 &&
            body_check(qfd, &h, NULL, why, sizeof why) == 0) {
            if (linkat(c->q_fd, name, c->entries_fd, key, 0) == 0 || errno == EEXIST) unlinkat(c->q_fd, name, 0);
            result = 0;
        }
        if (qfd >= 0) close(qfd);
    }
    fsync_dir(c->entries_fd);
    fsync_dir(c->q_fd);
done:
    free(dst);
    return result;
}

/* State of the entry under `key`: 1 valid (sha set), 0 absent (a corrupt one
 * is quarantined first and counts as absent), -1 I/O error (error set). */
static int entry_probe(magi_cache *c, const char *key, uint8_t sha[32], int *quarantined) {
    int fd = open_noatime(c->entries_fd, key);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT) return 0;
        magi_set_error(MAGI_ERR_IO, "cache entry '%s': cannot open: %s", key, strerror(e));
        return -1;
    }
    entry_head h;
    struct stat sb;
    char why[256], where[1024];
    if (head_read(fd, key, &h, &sb, why, sizeof why) == 0 && body_check(fd, &h, NULL, why, sizeof why) == 0) {
        memcpy(sha, h.sha, 32);
        close(fd);
        return 1;
    }
    if (quarantine_entry(c, key, fd, where, sizeof where) && quarantined) (*quarantined)++;
    close(fd);
    return 0;
}

/* ---- put ---- */

static magi_status fill_from_mem(void *ctx, uint8_t *buf, size_t len, uint64_t offset) {
    memcpy(buf, (const uint8_t *)ctx + offset, len);
    return MAGI_OK;
}

magi_status magi_cache_put(magi_cache_put_result *res, magi_cache *c, const char *key, const void *data,
                           size_t len, unsigned flags) {
    MAGI_ARG_NONNULL(c);
    MAGI_ARG_NONNULL(key);
    MAGI_ARG_CHECK(data || !len, "data is NULL (%zu bytes)", len);
    return magi_cache_put_stream(res, c, key, len, fill_from_mem, (void *)data, flags);
}

/* A unique name for a temporary in tmp/. */
static void temp_name(char *dst, size_t cap, const char *key, const char *what) {
    uint64_t rnd = 0;
    if (getrandom(&rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) rnd ^= (uint64_t)now_ns();
    snprintf(dst, cap, "%s.%ld.%016llx.%s", key, (long)getpid(), (unsigned long long)rnd, what);
}

/* The temporary in tmp/ a put writes its entry into: unnamed (O_TMPFILE,
 * reached through procpath) where the file system has it, so a killed
 * writer leaves nothing at all; else named (name) and locked, so gc removes
 * it once the lock is free. name is also set when an unnamed temporary is
 * given a name to be renamed. */
typedef struct put_temp {
    int fd;
    int unnamed;
    char procpath[64];
    char *name;
} put_temp;

/* Create and lock the temporary. On failure t may hold a descriptor and a
 * name: temp_discard() removes them. */
static magi_status temp_open(put_temp *t, magi_cache *c, const char *key, unsigned flags) {
    magi_status st = MAGI_OK;
    if (!(flags & MAGI_CACHE_PUT_NAMED_TEMP)) {
#ifdef O_TMPFILE
        t->fd = openat(c->tmp_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0644);
        if (t->fd >= 0) {
            struct stat sb;
            snprintf(t->procpath, sizeof t->procpath, "/proc/self/fd/%d", t->fd);
            if (stat(t->procpath, &sb) == 0) t->unnamed = 1; /* linkat through /proc works */
            else { close(t->fd); t->fd = -1; }
        }
#endif
    }
    if (!t->unnamed) {
        char name[MAGI_CACHE_KEY_MAX + 96];
        temp_name(name, sizeof name, key, "tmp");
        t->name = strdup(name);
        if (!t->name) MAGI_FAIL(MAGI_ERR_NOMEM, "cache: out of memory");
        t->fd = openat(c->tmp_fd, t->name, O_CREAT | O_EXCL | O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (t->fd < 0) MAGI_FAIL(MAGI_ERR_IO, "cache put '%s': cannot create %s: %s", key, t->name, strerror(errno));
    }
    /* The lock marks a live writer; it follows the inode into entries/ and
     * ends when this process closes the file or dies. */
    if (flock(t->fd, LOCK_EX) != 0)
        MAGI_FAIL(MAGI_ERR_IO, "cache put '%s': cannot lock the temporary: %s", key, strerror(errno));
cleanup:
    return st;
}

/* Write the entry into the temporary: a zero header, the content from
 * fill() in chunks hashed as they pass, then the header with the length
 * and the content's SHA-256 (into sha), and fsync. */
static magi_status temp_write(uint8_t sha[32], const put_temp *t, const char *key, uint64_t len,
                              magi_chunk_fill_fn fill, void *ctx) {
    magi_status st = MAGI_OK;
    size_t klen = strlen(key), hlen = ENTRY_FIXED + klen;
    uint8_t *head = calloc(1, hlen), *chunk = malloc(IO_CHUNK);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!head || !chunk || !md) MAGI_FAIL(MAGI_ERR_NOMEM, "cache: out of memory");
    if (!EVP_DigestInit_ex(md, EVP_sha256(), NULL)) MAGI_FAIL(MAGI_ERR_NOMEM, "cache: sha256 init failed");
    if (write_full(t->fd, head, hlen, 0) != 0) /* placeholder; rewritten with the digest */
        MAGI_FAIL(MAGI_ERR_IO, "cache put '%s': write failed: %s", key, strerror(errno));
    for (uint64_t off = 0; off < len;) {
        size_t n = len - off > IO_CHUNK ? IO_CHUNK : (size_t)(len - off);
        st = fill(ctx, chunk, n, off);
        if (st != MAGI_OK) {
            magi_error_prefix(st, "cache put '%s': producing bytes at offset %llu", key, (unsigned long long)off);
            goto cleanup;
        }
        EVP_DigestUpdate(md, chunk, n);
        if (write_full(t->fd, chunk, n, hlen + off) != 0)
            MAGI_FAIL(MAGI_ERR_IO, "cache put '%s': write failed: %s", key, strerror(errno));
        off += n;
    }
    unsigned int dlen = 32;
    EVP_DigestFinal_ex(md, sha, &dlen);
    memcpy(head, ENTRY_MAGIC, 8);
    put_u32(head + 8, ENTRY_VERSION);
    put_u32(head + 12, (uint32_t)klen);
    put_u64(head + 16, len);
    memcpy(head + 24, sha, 32);
    memcpy(head + ENTRY_FIXED, key, klen);
    if (write_full(t->fd, head, hlen, 0) != 0)
        MAGI_FAIL(MAGI_ERR_IO, "cache put '%s': write failed: %s", key, strerror(errno));
    if (fsync(t->fd) != 0) MAGI_FAIL(MAGI_ERR_IO, "cache put '%s': fsync failed: %s", key, strerror(errno));
cleanup:
    free(chunk);
    free(head);
    EVP_MD_CTX_free(md);
    return st;
}

/* MAGI_CACHE_PUT_REPLACE: rename the temporary over the entry (an unnamed
 * one is given a name in tmp/ first: rename needs one). */
static magi_status publish_replace(magi_cache_put_result *r, put_temp *t, magi_cache *c, const char *key) {
    magi_status st = MAGI_OK;
    if (t->unnamed) {
        char name[MAGI_CACHE_KEY_MAX + 96];
        temp_name(name, sizeof name, key, "pub");
        t->name = strdup(name);
        if (!t->name) MAGI_FAIL(MAGI_ERR_NOMEM, "cache: out of memory");
        if (linkat(AT_FDCWD, t->procpath, c->tmp_fd, t->name, AT_SYMLINK_FOLLOW) != 0)
            MAGI_FAIL(MAGI_ERR_IO, "cache put '%s': cannot name the temporary: %s", key, strerror(errno));
    }
    if (renameat(c->tmp_fd, t->name, c->entries_fd, key) != 0) {
        int e = errno;
        unlinkat(c->tmp_fd, t->name, 0);
        MAGI_FAIL(MAGI_ERR_IO, "cache put '%s': cannot publish: %s", key, strerror(e));
    }
    free(t->name);
    t->name = NULL;
    r->published = 1;
cleanup:
    return st;
}

/* Link the temporary as the entry: the first complete publish wins. On
 * EEXIST the winner is checked; a valid one serves (its digest in r), a
 * corrupt one is quarantined and the link tried again (bounded). */
static magi_status publish_first(magi_cache_put_result *r, put_temp *t, magi_cache *c, const char *key) {
    magi_status st = MAGI_OK;
    for (int attempt = 0;; attempt++) {
        int rc = t->unnamed ? linkat(AT_FDCWD, t->procpath, c->entries_fd, key, AT_SYMLINK_FOLLOW)
                            : linkat(c->tmp_fd, t->name, c->entries_fd, key, 0);
        if (rc == 0) { r->published = 1; break; }
        if (errno != EEXIST)
            MAGI_FAIL(MAGI_ERR_IO, "cache put '%s': cannot publish: %s", key, strerror(errno));
        uint8_t other[32];
        int p = entry_probe(c, key, other, &r->quarantined);
        if (p < 0) { st = MAGI_ERR_IO; goto cleanup; }
        if (p == 1) {
            magi_hex(r->sha256_hex, other, 32);
            break;
        }
        if (attempt >= 16)
            MAGI_FAIL(MAGI_ERR_IO, "cache put '%s': entry keeps reappearing corrupt", key);
    }
    if (t->name) {
        unlinkat(c->tmp_fd, t->name, 0);
        free(t->name);
        t->name = NULL;
    }
cleanup:
    return st;
}

/* What is left of a temporary: a name not published is removed. */
static void temp_discard(put_temp *t, magi_cache *c) {
    if (t->name) unlinkat(c->tmp_fd, t->name, 0); /* failed before publishing */
    if (t->fd >= 0) close(t->fd);
    free(t->name);
}

magi_status magi_cache_put_stream(magi_cache_put_result *res, magi_cache *c, const char *key,
                                  uint64_t len, magi_chunk_fill_fn fill, void *ctx,
                                  unsigned flags) {
    magi_status st = MAGI_OK;
    magi_cache_put_result r;
    put_temp t = {-1, 0, "", NULL};
    uint8_t sha[32];
    memset(&r, 0, sizeof r);
    MAGI_ARG_NONNULL(c);
    MAGI_ARG_NONNULL(key);
    MAGI_ARG_NONNULL(fill);
    MAGI_CHECK(magi_cache_key_check(key));
    if (len > ENTRY_MAX_CONTENT)
        MAGI_FAIL(MAGI_ERR_LIMIT, "cache put '%s': %llu bytes exceeds the entry limit of %llu", key,
                  (unsigned long long)len, (unsigned long long)ENTRY_MAX_CONTENT);
    if (!(flags & MAGI_CACHE_PUT_REPLACE)) {
        int p = entry_probe(c, key, sha, &r.quarantined);
        if (p < 0) { st = MAGI_ERR_IO; goto cleanup; }
        if (p == 1) { /* a valid entry is there already */
            magi_hex(r.sha256_hex, sha, 32);
            goto done;
        }
    }
    MAGI_CHECK(temp_open(&t, c, key, flags));
    MAGI_CHECK(temp_write(sha, &t, key, len, fill, ctx));
    magi_hex(r.sha256_hex, sha, 32);
    MAGI_CHECK(flags & MAGI_CACHE_PUT_REPLACE ? publish_replace(&r, &t, c, key) : publish_first(&r, &t, c, key));
    if (fsync_dir(c->entries_fd) != 0)
        MAGI_FAIL(MAGI_ERR_IO, "cache put '%s': cannot fsync %s: %s", key, c->entries, strerror(errno));
done:
    if (res) *res = r;
cleanup:
    temp_discard(&t, c);
    return st;
}

/* ---- get ---- */

static int hex_to_bytes(const char *hex, uint8_t out[32]) {
    if (strlen(hex) != 64) return -1;
    for (int i = 0; i < 32; i++) {
        unsigned v = 0;
        for (int j = 0; j < 2; j++) {
            char ch = hex[2 * i + j];
            v <<= 4;
            if (ch >= '0' && ch <= '9') v |= (unsigned)(ch - '0');
            else if (ch >= 'a' && ch <= 'f') v |= (unsigned)(ch - 'a' + 10);
            else if (ch >= 'A' && ch <= 'F') v |= (unsigned)(ch - 'A' + 10);
            else return -1;
        }
        out[i] = (uint8_t)v;
    }
    return 0;
}

static void entry_fill_info(magi_cache_entry *e, const char *key, const entry_head *h, const struct stat *sb) {
    memset(e, 0, sizeof *e);
    snprintf(e->key, sizeof e->key, "%s", key);
    magi_hex(e->sha256_hex, h->sha, 32);
    e->size = h->len;
    e->file_bytes = (uint64_t)sb->st_size;
    e->atime_ns = ts_ns(sb->st_atim);
    e->mtime_ns = ts_ns(sb->st_mtim);
}

magi_status magi_cache_get(void **out, size_t *out_len, magi_cache_entry *info,
                           int *quarantined, magi_cache *c, const char *key, const char *expect_sha256_hex,
                           uint64_t max_bytes) {
    magi_status st = MAGI_OK;
    char *path = NULL;
    uint8_t *buf = NULL, want[32];
    int fd = -1;
    if (quarantined) *quarantined = 0;
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    MAGI_ARG_NONNULL(out_len);
    *out_len = 0;
    MAGI_ARG_NONNULL(c);
    MAGI_ARG_NONNULL(key);
    MAGI_CHECK(magi_cache_key_check(key));
    if (expect_sha256_hex && hex_to_bytes(expect_sha256_hex, want) != 0)
        MAGI_FAIL(MAGI_ERR_INVALID_ARG, "cache get: '%s' is not a SHA-256 in hex", expect_sha256_hex);
    if (!max_bytes) max_bytes = DEFAULT_MAX_GET;
    path = path_join(c->entries, key);
    if (!path) MAGI_FAIL(MAGI_ERR_NOMEM, "cache: out of memory");
    fd = openat(c->entries_fd, key, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT) MAGI_FAIL(MAGI_ERR_NOT_FOUND, "cache miss: no entry for key '%s'", key);
        MAGI_FAIL(MAGI_ERR_IO, "cache entry '%s': cannot open: %s", key, strerror(errno));
    }
    entry_head h;
    struct stat sb;
    char why[256];
    int bad = head_read(fd, key, &h, &sb, why, sizeof why) != 0;
    if (!bad && expect_sha256_hex && memcmp(h.sha, want, 32) != 0) {
        char have[65];
        magi_hex(have, h.sha, 32);
        MAGI_FAIL(MAGI_ERR_NOT_FOUND, "cache miss: entry '%s' holds content %s, not %s", key, have,
                  expect_sha256_hex);
    }
    if (!bad && h.len > max_bytes)
        MAGI_FAIL(MAGI_ERR_LIMIT, "cache entry '%s': %llu bytes exceeds the limit of %llu", key,
                  (unsigned long long)h.len, (unsigned long long)max_bytes);
    if (!bad && h.len > SIZE_MAX - 1) MAGI_FAIL(MAGI_ERR_LIMIT, "cache entry '%s' is too large", key);
    if (!bad) {
        buf = malloc(h.len ? (size_t)h.len : 1);
        if (!buf) MAGI_FAIL(MAGI_ERR_NOMEM, "cache entry '%s': out of memory for %llu bytes", key, (unsigned long long)h.len);
        bad = body_check(fd, &h, buf, why, sizeof why) != 0;
        /* its own digest is not enough: under a fingerprint key the content
         * must be that region (else another region is served) */
        if (!bad) bad = magi_cache_content_check(key, buf, (size_t)h.len, why, sizeof why) != 0;
    }
    if (bad) {
        char where[1024] = "";
        int moved = quarantine_entry(c, key, fd, where, sizeof where);
        if (quarantined) *quarantined = moved;
        if (moved)
            MAGI_FAIL(MAGI_ERR_NOT_FOUND, "cache miss: entry '%s' is corrupt (%s); quarantined as %s", key, why, where);
        MAGI_FAIL(MAGI_ERR_NOT_FOUND, "cache miss: entry '%s' is corrupt (%s)", key, why);
    }
    /* Mark the use: the access time is the LRU clock gc reads. Best effort
     * (needs ownership of the file). */
    struct timespec times[2] = {{0, UTIME_NOW}, {0, UTIME_OMIT}};
    futimens(fd, times);
    if (info) {
        struct stat now;
        if (fstat(fd, &now) == 0) sb = now;
        entry_fill_info(info, key, &h, &sb);
    }
    *out = buf;
    *out_len = (size_t)h.len;
    buf = NULL;
cleanup:
    if (fd >= 0) close(fd);
    free(buf);
    free(path);
    return st;
}

magi_status magi_cache_check_owner(magi_cache *c, const char *key) {
    magi_status st = MAGI_OK;
    char *path = NULL;
    int fd = -1;
    MAGI_ARG_NONNULL(c);
    MAGI_ARG_NONNULL(key);
    MAGI_CHECK(magi_cache_key_check(key));
    const int fds[] = {c->dir_fd, c->root_fd, c->entries_fd};
    const char *what[] = {c->dir, c->root, c->entries};
    for (int i = 0; i < 3; i++)
        if ((st = magi_fd_check_own(fds[i], what[i]))) {
            magi_error_prefix(st, "cache directory");
            goto cleanup;
        }
    path = path_join(c->entries, key);
    if (!path) MAGI_FAIL(MAGI_ERR_NOMEM, "cache: out of memory");
    fd = openat(c->entries_fd, key, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT) MAGI_FAIL(MAGI_ERR_NOT_FOUND, "cache miss: no entry for key '%s'", key);
        MAGI_FAIL(MAGI_ERR_IO, "cache entry %s: cannot open: %s", path, strerror(errno));
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) MAGI_FAIL(MAGI_ERR_IO, "cache entry %s: cannot stat: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode)) MAGI_FAIL(MAGI_ERR_INVALID_ARG, "cache entry %s: not a regular file", path);
    if ((st = magi_fd_check_own(fd, path))) magi_error_prefix(st, "cache entry");
cleanup:
    if (fd >= 0) close(fd);
    free(path);
    return st;
}

/* ---- remove ---- */

const char *magi_cache_dir_path(const magi_cache *c) { return c->dir; }

magi_status magi_cache_remove(magi_cache *c, const char *key, unsigned flags) {
    magi_status st = MAGI_OK;
    char *path = NULL;
    int fd = -1;
    MAGI_ARG_NONNULL(c);
    MAGI_ARG_NONNULL(key);
    MAGI_ARG_CHECK(!(flags & ~MAGI_CACHE_REMOVE_CHECK_ONLY), "unknown flags 0x%x", flags);
    MAGI_CHECK(magi_cache_key_check(key));
    path = path_join(c->entries, key);
    if (!path) MAGI_FAIL(MAGI_ERR_NOMEM, "cache: out of memory");
    fd = openat(c->entries_fd, key, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT) MAGI_FAIL(MAGI_ERR_NOT_FOUND, "cache miss: no entry for key '%s'", key);
        if (errno == ELOOP)
            MAGI_FAIL(MAGI_ERR_INVALID_ARG, "cache entry %s: a symbolic link, not an entry "
                      "(`magi-aot cache verify %s` moves it to quarantine)", path, c->dir);
        MAGI_FAIL(MAGI_ERR_IO, "cache entry %s: cannot open: %s", path, strerror(errno));
    }
    struct stat sb, moved;
    if (fstat(fd, &sb) != 0) MAGI_FAIL(MAGI_ERR_IO, "cache entry %s: cannot stat: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        MAGI_FAIL(MAGI_ERR_INVALID_ARG, "cache entry %s: not a regular file "
                  "(`magi-aot cache verify %s` moves it to quarantine)", path, c->dir);
    if (sb.st_uid != geteuid())
        MAGI_FAIL(MAGI_ERR_INVALID_ARG, "cache entry %s: owned by uid %lu, not by this user (uid %lu); "
                  "only its owner removes it", path, (unsigned long)sb.st_uid, (unsigned long)geteuid());
    if (flags & MAGI_CACHE_REMOVE_CHECK_ONLY) goto cleanup;
    /* Move it aside, then unlink what was moved only if it is the file
     * checked: a writer may have published another under the key since. */
    char name[MAGI_CACHE_KEY_MAX + 64];
    snprintf(name, sizeof name, "%s.%ld.%lld.rm", key, (long)getpid(), (long long)now_ns());
    if (renameat(c->entries_fd, key, c->q_fd, name) != 0) {
        if (errno == ENOENT) MAGI_FAIL(MAGI_ERR_NOT_FOUND, "cache miss: no entry for key '%s' (removed meanwhile)", key);
        MAGI_FAIL(MAGI_ERR_IO, "cache entry %s: cannot move it out: %s", path, strerror(errno));
    }
    if (fstatat(c->q_fd, name, &moved, AT_SYMLINK_NOFOLLOW) != 0 || moved.st_ino != sb.st_ino ||
        moved.st_dev != sb.st_dev) {
        if (linkat(c->q_fd, name, c->entries_fd, key, 0) == 0 || errno == EEXIST) unlinkat(c->q_fd, name, 0);
        fsync_dir(c->entries_fd);
        MAGI_FAIL(MAGI_ERR_IO, "cache entry %s: replaced by another writer while being removed; "
                  "the new entry is kept, nothing was removed", path);
    }
    if (unlinkat(c->q_fd, name, 0) != 0)
        MAGI_FAIL(MAGI_ERR_IO, "cache entry %s: moved to %s/%s but cannot remove it there: %s "
                  "(`cache gc` deletes quarantined files)", path, c->quarantine, name, strerror(errno));
    fsync_dir(c->entries_fd);
    fsync_dir(c->q_fd);
cleanup:
    if (fd >= 0) close(fd);
    free(path);
    return st;
}

/* ---- list / verify / gc ---- */

static int cmp_key(const void *a, const void *b) {
    return strcmp(((const magi_cache_entry *)a)->key, ((const magi_cache_entry *)b)->key);
}

/* Names in `dir` not starting with '.', malloc'd array of malloc'd strings. */
static magi_status list_names(int dirfd, const char *dir, char ***out, size_t *n) {
    magi_status st = MAGI_OK;
    char **v = NULL;
    size_t len = 0, cap = 0;
    int fd = dup(dirfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    *out = NULL;
    *n = 0;
    if (!d) {
        int e = errno;
        if (fd >= 0) close(fd);
        return magi_set_error(MAGI_ERR_IO, "cache: cannot read %s: %s", dir, strerror(e));
    }
    rewinddir(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (len == cap) {
            size_t nc = cap ? cap * 2 : 32, bytes;
            if (!magi_mul_ok(nc, sizeof *v, &bytes)) MAGI_FAIL(MAGI_ERR_NOMEM, "cache: out of memory");
            char **nv = realloc(v, bytes);
            if (!nv) MAGI_FAIL(MAGI_ERR_NOMEM, "cache: out of memory");
            v = nv;
            cap = nc;
        }
        if (!(v[len] = strdup(e->d_name))) MAGI_FAIL(MAGI_ERR_NOMEM, "cache: out of memory");
        len++;
    }
    *out = v;
    *n = len;
    v = NULL;
cleanup:
    if (v) {
        for (size_t i = 0; i < len; i++) free(v[i]);
        free(v);
    }
    closedir(d);
    return st;
}

static void free_names(char **v, size_t n) {
    for (size_t i = 0; i < n; i++) free(v[i]);
    free(v);
}

magi_status magi_cache_list(magi_cache_entry **out, size_t *n, size_t *n_bad, magi_cache *c) {
    magi_status st = MAGI_OK;
    char **names = NULL;
    size_t nn = 0, len = 0, bad = 0;
    char first_bad[512] = "";
    magi_cache_entry *v = NULL;
    MAGI_ARG_NONNULL(out);
    *out = NULL;
    MAGI_ARG_NONNULL(n);
    *n = 0;
    MAGI_ARG_NONNULL(c);
    MAGI_CHECK(list_names(c->entries_fd, c->entries, &names, &nn));
    v = calloc(nn ? nn : 1, sizeof *v);
    if (!v) MAGI_FAIL(MAGI_ERR_NOMEM, "cache: out of memory");
    for (size_t i = 0; i < nn; i++) {
        if (magi_cache_key_check(names[i]) != MAGI_OK) {
            if (!bad++) snprintf(first_bad, sizeof first_bad, "'%.200s' is not a cache key", names[i]);
            continue;
        }
        int fd = open_noatime(c->entries_fd, names[i]);
        if (fd < 0) {
            int e = errno;
            if (e != ENOENT && !bad++) /* unreadable (a symlink, no permission): counted, not hidden */
                snprintf(first_bad, sizeof first_bad, "entry '%s' cannot be opened: %s", names[i], strerror(e));
            continue; /* else removed meanwhile */
        }
        entry_head h;
        struct stat sb;
        char why[256];
        if (head_read(fd, names[i], &h, &sb, why, sizeof why) == 0) entry_fill_info(&v[len++], names[i], &h, &sb);
        else if (!bad++) snprintf(first_bad, sizeof first_bad, "entry '%s': %s", names[i], why);
        close(fd);
    }
    /* success; when some entries were not listed, the message names the first */
    if (bad)
        magi_set_error(MAGI_ERR_IO, "%zu unreadable entr%s not listed: %s (run 'cache verify')", bad,
                       bad == 1 ? "y" : "ies", first_bad);
    else magi_clear_error();
    qsort(v, len, sizeof *v, cmp_key);
    *out = v;
    *n = len;
    v = NULL;
    if (n_bad) *n_bad = bad;
cleanup:
    free(v);
    free_names(names, nn);
    return st;
}

magi_status magi_cache_verify(magi_cache_report *rep, magi_cache *c) {
    magi_status st = MAGI_OK;
    char **names = NULL;
    size_t nn = 0;
    magi_cache_report r;
    char first[1536] = "", first_skip[1024] = "";
    memset(&r, 0, sizeof r);
    MAGI_ARG_NONNULL(c);
    MAGI_CHECK(list_names(c->entries_fd, c->entries, &names, &nn));
    for (size_t i = 0; i < nn; i++) {
        entry_head h;
        struct stat sb;
        char why[256] = "invalid key in file name", where[1024] = "";
        if (magi_cache_key_check(names[i]) != MAGI_OK) {
            /* not a name put ever writes: left alone, but reported */
            if (!r.unreadable++)
                snprintf(first_skip, sizeof first_skip, "'%.200s' in %s is not a cache key", names[i], c->entries);
            continue;
        }
        int fd = open_noatime(c->entries_fd, names[i]);
        if (fd < 0) {
            int e = errno;
            if (e == ENOENT) continue; /* removed meanwhile */
            if (e == ELOOP) { /* a symlink: never followed; moved aside like a corrupt entry */
                char qname[MAGI_CACHE_KEY_MAX + 64];
                snprintf(qname, sizeof qname, "%s.%ld.%lld.bad", names[i], (long)getpid(), (long long)now_ns());
                if (renameat(c->entries_fd, names[i], c->q_fd, qname) == 0) {
                    if (!r.quarantined)
                        snprintf(first, sizeof first, "cache entry '%s' is a symbolic link; quarantined as %s/%s",
                                 names[i], c->quarantine, qname);
                    r.quarantined++;
                    continue;
                }
            }
            if (!r.unreadable++)
                snprintf(first_skip, sizeof first_skip, "cache entry '%s' cannot be opened: %s", names[i], strerror(e));
            continue;
        }
        int good = head_read(fd, names[i], &h, &sb, why, sizeof why) == 0;
        if (good && magi_cache_key_is_fingerprint(names[i])) {
            uint8_t *buf = malloc(h.len ? (size_t)h.len : 1);
            good = buf && body_check(fd, &h, buf, why, sizeof why) == 0 &&
                   magi_cache_content_check(names[i], buf, (size_t)h.len, why, sizeof why) == 0;
            if (!buf) snprintf(why, sizeof why, "out of memory");
            free(buf);
        } else if (good) {
            good = body_check(fd, &h, NULL, why, sizeof why) == 0;
        }
        if (good) {
            r.entries_ok++;
        } else if (quarantine_entry(c, names[i], fd, where, sizeof where)) {
            if (!r.quarantined)
                snprintf(first, sizeof first, "cache entry '%s' is corrupt (%s); quarantined as %s", names[i], why, where);
            r.quarantined++;
        } else if (!r.unreadable++) {
            snprintf(first_skip, sizeof first_skip, "cache entry '%s' is corrupt (%s) and could not be quarantined",
                     names[i], why);
        }
        close(fd);
    }
    if (r.quarantined)
        st = magi_set_error(MAGI_ERR_CORRUPT, "%s%s", first, r.quarantined > 1 ? " (and more)" : "");
    else if (r.unreadable)
        st = magi_set_error(MAGI_ERR_IO, "%zu entr%s not checked: %s", r.unreadable, r.unreadable == 1 ? "y" : "ies",
                            first_skip);
    else
        magi_clear_error();
cleanup:
    if (rep) *rep = r;
    free_names(names, nn);
    return st;
}

typedef struct gc_item {
    char *name;
    uint64_t bytes;
    int64_t atime;
} gc_item;

static int cmp_lru(const void *a, const void *b) {
    const gc_item *x = a, *y = b;
    if (x->atime != y->atime) return x->atime < y->atime ? -1 : 1;
    return strcmp(x->name, y->name);
}

magi_status magi_cache_gc(magi_cache_report *rep, magi_cache *c, const magi_cache_gc_options *opts) {
    magi_status st = MAGI_OK;
    magi_cache_gc_options o = MAGI_CACHE_GC_OPTIONS_INIT;
    magi_cache_report r;
    char **names = NULL;
    size_t nn = 0, ni = 0;
    gc_item *items = NULL;
    memset(&r, 0, sizeof r);
    MAGI_ARG_NONNULL(c);
    if (opts) {
        static const uint32_t revs[] = {MAGI_CACHE_GC_OPTIONS_VERSION};
        if ((st = magi_struct_read(&o, NULL, opts, SIZE_MAX, "magi_cache_gc_options", MAGI_STRUCT_REVS(revs))))
            return st;
    }

    /* 1. temporaries whose writer is gone: lockable and past the grace
     *    period (the grace covers the instant between create and flock). */
    MAGI_CHECK(list_names(c->tmp_fd, c->tmp, &names, &nn));
    int64_t now = now_ns();
    for (size_t i = 0; i < nn; i++) {
        int fd = openat(c->tmp_fd, names[i], O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        struct stat sb;
        if (fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && flock(fd, LOCK_EX | LOCK_NB) == 0 &&
            now - ts_ns(sb.st_mtim) >= (int64_t)o.tmp_grace_s * 1000000000) {
            if (unlinkat(c->tmp_fd, names[i], 0) == 0) r.temps_removed++;
        }
        if (fd >= 0) close(fd);
    }
    free_names(names, nn);
    names = NULL;
    nn = 0;

    /* 2. quarantined files. */
    if (!o.keep_quarantine) {
        MAGI_CHECK(list_names(c->q_fd, c->quarantine, &names, &nn));
        for (size_t i = 0; i < nn; i++) /* unlinkat removes a symlink itself, never a directory */
            if (unlinkat(c->q_fd, names[i], 0) == 0) r.quarantine_removed++;
        free_names(names, nn);
        names = NULL;
        nn = 0;
    }

    /* 3. entries, least recently used first, down to the budget. */
    MAGI_CHECK(list_names(c->entries_fd, c->entries, &names, &nn));
    items = calloc(nn ? nn : 1, sizeof *items);
    if (!items) MAGI_FAIL(MAGI_ERR_NOMEM, "cache: out of memory");
    uint64_t total = 0;
    for (size_t i = 0; i < nn; i++) {
        struct stat sb;
        if (fstatat(c->entries_fd, names[i], &sb, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno != ENOENT && !r.unreadable++) /* ENOENT: removed meanwhile */
                magi_set_error(MAGI_ERR_IO, "cache gc: cannot stat entry '%s': %s", names[i], strerror(errno));
        } else if (S_ISREG(sb.st_mode)) {
            items[ni].name = names[i];
            items[ni].bytes = (uint64_t)sb.st_size;
            items[ni].atime = ts_ns(sb.st_atim);
            total += items[ni].bytes;
            ni++;
        } else if (!r.unreadable++) {
            /* not an entry put ever writes (a directory, a FIFO, a symlink):
             * never followed or removed here, but never silently skipped */
            magi_set_error(MAGI_ERR_IO, "cache gc: entry '%s' is not a regular file (%s); left alone ('cache "
                           "verify' quarantines it)", names[i], S_ISDIR(sb.st_mode) ? "a directory" :
                           S_ISLNK(sb.st_mode) ? "a symbolic link" : S_ISFIFO(sb.st_mode) ? "a FIFO" : "not a file");
        } /* (a later one is counted; the message names the first) */
    }
    qsort(items, ni, sizeof *items, cmp_lru);
    for (size_t i = 0; i < ni && total > o.max_bytes; i++) {
        if (unlinkat(c->entries_fd, items[i].name, 0) == 0) {
            r.evicted++;
            r.evicted_bytes += items[i].bytes;
            total -= items[i].bytes;
        } else if (errno == ENOENT) {
            total -= items[i].bytes; /* a racer removed it */
        } else if (!r.unreadable++) {
            magi_set_error(MAGI_ERR_IO, "cache gc: cannot remove entry '%s': %s", items[i].name, strerror(errno));
        }
    }
    r.bytes_after = total;
    fsync_dir(c->entries_fd);
    fsync_dir(c->tmp_fd);
    fsync_dir(c->q_fd);
    if (r.unreadable)
        st = magi_error_prefix(MAGI_ERR_IO, "%zu entr%s could not be removed or checked (%llu bytes left)",
                               r.unreadable, r.unreadable == 1 ? "y" : "ies", (unsigned long long)total);
    else
        magi_clear_error();
cleanup:
    if (rep) *rep = r;
    free(items);
    free_names(names, nn);
    return st;
}
