/* Files: whole regular files read under a byte limit, atomic writes
 * (temp + fsync + rename + fsync dir) and read-only mappings. */
#include "internal.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

magi_status magi_atomic_begin(magi_atomic_file *f, const char *path) {
    magi_status st = MAGI_OK;
    char *dir = NULL;
    f->fd = -1;
    f->tmp_path = NULL;
    f->path = NULL;
    if (!path || !*path) return magi_set_error(MAGI_ERR_INVALID_ARG, "write: empty path");
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return magi_set_error(MAGI_ERR_IO, "%s: is a directory", path);
    dir = dir_of(path);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    f->path = strdup(path);
    if (!dir || !f->path) MAGI_FAIL(MAGI_ERR_NOMEM, "%s: out of memory", path);
    if (asprintf(&f->tmp_path, "%s/.%s.tmp.XXXXXX", dir, base) < 0) {
        f->tmp_path = NULL;
        MAGI_FAIL(MAGI_ERR_NOMEM, "%s: out of memory", path);
    }
    f->fd = mkostemp(f->tmp_path, O_CLOEXEC);
    if (f->fd < 0)
        MAGI_FAIL(MAGI_ERR_IO, "%s: cannot create a temporary file in '%s': %s", path, dir, strerror(errno));
    if (fchmod(f->fd, 0644) != 0)
        MAGI_FAIL(MAGI_ERR_IO, "%s: chmod of the temporary file failed: %s", path, strerror(errno));
cleanup:
    free(dir);
    if (st) magi_atomic_abort(f);
    return st;
}

magi_status magi_atomic_write(magi_atomic_file *f, const void *p, size_t n) {
    const char *c = p;
    while (n) {
        ssize_t w = write(f->fd, c, n > (1u << 30) ? (1u << 30) : n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0)
            return magi_set_error(MAGI_ERR_IO, "%s: write failed: %s", f->path,
                                  w < 0 ? strerror(errno) : "no progress");
        c += w;
        n -= (size_t)w;
    }
    return MAGI_OK;
}

magi_status magi_atomic_hole(magi_atomic_file *f, uint64_t n) {
    off_t cur = lseek(f->fd, 0, SEEK_CUR);
    if (cur < 0 || n > (uint64_t)INT64_MAX - (uint64_t)cur)
        return magi_set_error(MAGI_ERR_IO, "%s: seek failed", f->path);
    off_t end = cur + (off_t)n;
    /* Extending with ftruncate leaves a hole that reads back as zeros. */
    if (ftruncate(f->fd, end) != 0 || lseek(f->fd, end, SEEK_SET) != end)
        return magi_set_error(MAGI_ERR_IO, "%s: cannot extend file: %s", f->path, strerror(errno));
    return MAGI_OK;
}

magi_status magi_atomic_commit(magi_atomic_file *f) {
    magi_status st = MAGI_OK;
    char *dir = NULL;
    int dfd = -1;
    if (fsync(f->fd) != 0) MAGI_FAIL(MAGI_ERR_IO, "%s: fsync failed: %s", f->path, strerror(errno));
    if (close(f->fd) != 0) {
        f->fd = -1;
        MAGI_FAIL(MAGI_ERR_IO, "%s: close failed: %s", f->path, strerror(errno));
    }
    f->fd = -1;
    if (rename(f->tmp_path, f->path) != 0)
        MAGI_FAIL(MAGI_ERR_IO, "%s: rename failed: %s", f->path, strerror(errno));
    free(f->tmp_path);
    f->tmp_path = NULL; /* now the final file: nothing to unlink */
    dir = dir_of(f->path);
    if (!dir) MAGI_FAIL(MAGI_ERR_NOMEM, "%s: out of memory", f->path);
    dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fsync(dfd) != 0)
        MAGI_FAIL(MAGI_ERR_IO, "%s: fsync of directory '%s' failed: %s", f->path, dir, strerror(errno));
cleanup:
    if (dfd >= 0) close(dfd);
    free(dir);
    magi_atomic_abort(f);
    return st;
}

void magi_atomic_abort(magi_atomic_file *f) {
    if (f->fd >= 0) close(f->fd);
    f->fd = -1;
    if (f->tmp_path) unlink(f->tmp_path);
    free(f->tmp_path);
    free(f->path);
    f->tmp_path = NULL;
    f->path = NULL;
}

magi_status magi_write_file_atomic(const char *path, const void *data, size_t len) {
    magi_atomic_file f;
    MAGI_ARG_NONNULL(path);
    MAGI_ARG_CHECK(data || !len, "data is NULL (%zu bytes)", len);
    magi_status st = magi_atomic_begin(&f, path);
    if (st) return st;
    st = magi_atomic_write(&f, data, len);
    if (st) {
        magi_atomic_abort(&f);
        return st;
    }
    return magi_atomic_commit(&f);
}

/* ---- mapping ---- */

/* Read up to n bytes at offset off; *got the bytes read (fewer at EOF). */
static magi_status pread_all(int fd, const char *path, void *buf, size_t n, size_t off, size_t *got) {
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(fd, (char *)buf + done, n - done, (off_t)(off + done));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return magi_set_error(MAGI_ERR_IO, "%s: read failed: %s", path, strerror(errno));
        if (r == 0) break;
        done += (size_t)r;
    }
    *got = done;
    return MAGI_OK;
}

static magi_status map_fd(magi_mapped *m, const char *path, int fd);

magi_status magi_map_file(magi_mapped *m, const char *path, uint64_t max_bytes) {
    magi_status st = MAGI_OK;
    memset(m, 0, sizeof *m);
    int fd;
    if ((st = magi_open_regular(path, max_bytes, &fd, &m->size)) != MAGI_OK) return st;
    st = map_fd(m, path, fd);
    close(fd);
    return st;
}

magi_status magi_map_or_copy_file(magi_mapped *m, const char *path, uint64_t max_bytes, const void *magic,
                                  size_t magic_len, uint64_t copy_max) {
    magi_status st = MAGI_OK;
    uint8_t *buf = NULL;
    memset(m, 0, sizeof *m);
    int fd;
    if ((st = magi_open_regular(path, max_bytes, &fd, &m->size)) != MAGI_OK) return st;
    if (m->size >= magic_len && m->size <= copy_max && magic_len <= 64) {
        /* the magic first, into a small buffer: another kind of file is
         * mapped without allocating its size */
        uint8_t head[64];
        size_t got = 0;
        MAGI_CHECK(pread_all(fd, path, head, magic_len, 0, &got));
        if (got == magic_len && !memcmp(head, magic, magic_len)) {
            buf = malloc(m->size ? m->size : 1);
            if (!buf) MAGI_FAIL(MAGI_ERR_NOMEM, "%s: out of memory reading %zu bytes", path, m->size);
            memcpy(buf, head, magic_len);
            MAGI_CHECK(pread_all(fd, path, buf + got, m->size - got, got, &got));
            m->size = magic_len + got; /* a file that shrank: what is there */
            m->data = buf;
            m->copied = 1;
            buf = NULL;
            goto cleanup;
        }
    }
    st = map_fd(m, path, fd);
cleanup:
    free(buf);
    close(fd);
    return st;
}

static magi_status map_fd(magi_mapped *m, const char *path, int fd) {
    magi_status st = MAGI_OK;
    if (m->size == 0) {
        static const uint8_t empty[1];
        m->data = empty;
        goto cleanup;
    }
    void *p = mmap(NULL, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) MAGI_FAIL(MAGI_ERR_IO, "%s: mmap failed: %s", path, strerror(errno));
    m->data = p;
    m->mapped = 1;
cleanup:
    return st;
}

void magi_unmap_file(magi_mapped *m) {
    if (m->mapped) munmap((void *)m->data, m->size);
    if (m->copied) free((void *)m->data);
    memset(m, 0, sizeof *m);
}

magi_status magi_open_regular(const char *path, uint64_t max_bytes, int *fd_out, size_t *size_out) {
    magi_status st = MAGI_OK;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return magi_set_error(MAGI_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) MAGI_FAIL(MAGI_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode)) MAGI_FAIL(MAGI_ERR_IO, "%s: not a regular file", path);
    if ((uint64_t)sb.st_size > max_bytes || (uint64_t)sb.st_size > SIZE_MAX - 1)
        MAGI_FAIL(MAGI_ERR_LIMIT, "%s: %lld bytes exceeds the input limit of %llu bytes", path,
                  (long long)sb.st_size, (unsigned long long)max_bytes);
    *fd_out = fd;
    *size_out = (size_t)sb.st_size;
    return MAGI_OK;
cleanup:
    close(fd);
    return st;
}

magi_status magi_read_file(const char *path, uint64_t max_bytes, char **out, size_t *out_len) {
    magi_status st = MAGI_OK;
    char *buf = NULL;
    int fd;
    size_t size;
    if ((st = magi_open_regular(path, max_bytes, &fd, &size)) != MAGI_OK) return st;
    buf = malloc(size + 1);
    if (!buf) MAGI_FAIL(MAGI_ERR_NOMEM, "%s: out of memory reading %zu bytes", path, size);
    size_t got = 0;
    while (got < size) {
        ssize_t n = read(fd, buf + got, size - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) MAGI_FAIL(MAGI_ERR_IO, "%s: read failed: %s", path, strerror(errno));
        if (n == 0) break; /* file shrank: use what is there */
        got += (size_t)n;
    }
    buf[got] = '\0';
    *out = buf;
    *out_len = got;
    buf = NULL;
cleanup:
    free(buf);
    close(fd);
    return st;
}
