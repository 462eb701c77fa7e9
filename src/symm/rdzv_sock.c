/* Local rendezvous over a Unix stream socket (see rdzv_sock.h). */
#include "rdzv_sock.h"
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define FRAME_MAGIC 0x314b534du /* "MSK1" */
#define MAX_PAYLOAD (1ull << 30)
#define DEFAULT_TIMEOUT_MS 60000u
#define HELLO_MS 5000      /* a connection must say HELLO within this */
#define MAX_PENDING 64u    /* connections not yet identified, at most */

enum { F_HELLO = 1, F_DATA = 2, F_ERROR = 3 };

typedef struct frame {
    uint32_t magic;
    uint32_t kind;
    int32_t arg;     /* HELLO: rank; ERROR: status; DATA: 0 */
    uint32_t world;  /* HELLO: world; else 0 */
    uint64_t len;    /* payload bytes */
} frame;

struct magi_symm_sock {
    uint32_t rank, world, timeout_ms;
    int *fds;        /* rank 0: fds[r] for r >= 1; others: fds[0] is the link to rank 0 */
    char *path;      /* for messages */
    char *bind_path; /* what bind/connect use: inside the checked directory */
    int dirfd;
    uint8_t job[32];
    int listen_fd;
    int failed;      /* an error was sent or received: collectives refuse */
};

static int64_t now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* 0 ok, 1 timeout, 2 peer closed, -1 error (errno). */
static int io_full(int fd, void *buf, size_t n, int64_t deadline, int writing) {
    uint8_t *p = buf;
    while (n) {
        int64_t left = deadline - now_ms();
        if (left <= 0) return 1;
        struct pollfd pf = {fd, (short)(writing ? POLLOUT : POLLIN), 0};
        int r = poll(&pf, 1, left > 1000 ? 1000 : (int)left);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (r == 0) continue;
        ssize_t k = writing ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
        if (k < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            if (errno == EPIPE || errno == ECONNRESET) return 2;
            return -1;
        }
        if (k == 0) return 2;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static int send_frame(int fd, uint32_t kind, int32_t arg, uint32_t world, const void *pl,
                      uint64_t len, int64_t deadline) {
    frame f = {FRAME_MAGIC, kind, arg, world, len};
    int r = io_full(fd, &f, sizeof f, deadline, 1);
    if (!r && len) r = io_full(fd, (void *)pl, (size_t)len, deadline, 1);
    return r;
}

/* Read a frame; payload malloc'd into *pl (NUL-terminated). */
static int recv_frame(int fd, frame *f, uint8_t **pl, int64_t deadline) {
    *pl = NULL;
    int r = io_full(fd, f, sizeof *f, deadline, 0);
    if (r) return r;
    if (f->magic != FRAME_MAGIC || f->len > MAX_PAYLOAD) return -2;
    *pl = malloc((size_t)f->len + 1);
    if (!*pl) return -3;
    r = io_full(fd, *pl, (size_t)f->len, deadline, 0);
    if (r) {
        free(*pl);
        *pl = NULL;
        return r;
    }
    (*pl)[f->len] = 0;
    return 0;
}

static const char *io_what(int r) {
    switch (r) {
    case 1: return "timed out";
    case 2: return "connection closed (the process exited?)";
    case -2: return "garbage on the socket";
    case -3: return "out of memory";
    default: return strerror(errno);
    }
}

static magi_status io_status(int r) {
    return r == 1 ? MAGI_ERR_TIMEOUT : r == -3 ? MAGI_ERR_NOMEM : MAGI_ERR_IO;
}

/* Rank 0: send an error frame carrying `msg` to every connected rank. */
static void root_broadcast_error(magi_symm_sock *s, magi_status st, const char *msg, uint32_t skip) {
    int64_t dl = now_ms() + 2000;
    for (uint32_t r = 1; r < s->world; r++)
        if (s->fds[r] >= 0 && r != skip)
            send_frame(s->fds[r], F_ERROR, (int32_t)st, 0, msg, strlen(msg), dl);
    s->failed = 1;
}

magi_status magi_symm_sock_abort(magi_symm_sock *s, magi_status st) {
    if (!s || s->failed || s->world == 1) return st;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", magi_last_error());
    if (s->rank == 0) {
        char full[1200];
        snprintf(full, sizeof full, "rank 0 failed: %s", msg);
        root_broadcast_error(s, st, full, UINT32_MAX);
    } else if (s->fds[0] >= 0) {
        send_frame(s->fds[0], F_ERROR, (int32_t)st, 0, msg, strlen(msg), now_ms() + 2000);
    }
    s->failed = 1;
    return st;
}

static magi_status error_from_frame(const frame *f, const uint8_t *pl, const char *ctx) {
    magi_status st = (magi_status)f->arg;
    if (st >= 0 || st < MAGI_STATUS_MIN) st = MAGI_ERR_DEVICE;
    return magi_set_error(st, "%s: %s", ctx, (const char *)pl);
}

/* Peer credentials: 0 when the other end runs as this user. */
static int peer_is_us(int fd) {
    struct ucred cr;
    socklen_t l = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &l) != 0) return -1;
    return cr.uid == geteuid() ? 0 : -1;
}

/* A connection that has not said HELLO yet. */
typedef struct pending {
    int fd;
    int64_t until;   /* drop it after this */
    size_t got;
    uint8_t buf[sizeof(frame) + 32];
} pending;

static void drop_pending(pending *p, uint32_t *n, uint32_t i) {
    close(p[i].fd);
    p[i] = p[--*n];
}

/* Rank 0's listening socket at bind_path. A name already there is not
 * ours and is left alone (the directory must be fresh per job). */
static magi_status root_listen(magi_symm_sock *s) {
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    memcpy(a.sun_path, s->bind_path, strlen(s->bind_path) + 1);
    s->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s->listen_fd < 0) return magi_set_error(MAGI_ERR_IO, "rendezvous: socket(): %s", strerror(errno));
    if (bind(s->listen_fd, (struct sockaddr *)&a, sizeof a) != 0) {
        int e = errno;
        close(s->listen_fd); /* and leave the path alone: it is not ours */
        s->listen_fd = -1;
        return magi_set_error(e == EADDRINUSE ? MAGI_ERR_INVALID_ARG : MAGI_ERR_IO,
                              "rendezvous: cannot bind '%s': %s%s", s->path, strerror(e),
                              e == EADDRINUSE ? " (the rendezvous directory must be fresh per job)" : "");
    }
    if (listen(s->listen_fd, (int)(s->world < 4096 ? s->world : 4096)) != 0) {
        unlink(s->bind_path);
        return magi_set_error(MAGI_ERR_IO, "rendezvous: listen '%s': %s", s->path, strerror(errno));
    }
    return MAGI_OK;
}

/* Rank 0 while the ranks arrive: the connections that have not said HELLO
 * yet (pend, polled through pf[1..np]; pf[0] is the listening socket), the
 * ranks that arrived (rank 0 included) and those of them that joined, and
 * the first refusal, sent to every refused rank and, at the end, to all. */
typedef struct root_arrivals {
    pending *pend;
    struct pollfd *pf;
    uint32_t np, arrived, joined;
    char err[512];
} root_arrivals;

/* Why rank 0 refuses a HELLO of this job, or NULL to take it. */
static const char *hello_refusal(const magi_symm_sock *s, const frame *f, char *msg, size_t cap) {
    if (f->world != s->world) {
        snprintf(msg, cap, "rank %d has world %u but rank 0 has world %u", f->arg, f->world, s->world);
        return msg;
    }
    if (f->arg <= 0 || (uint32_t)f->arg >= s->world) {
        snprintf(msg, cap, "a process joined as rank %d, outside world %u", f->arg, s->world);
        return msg;
    }
    if (s->fds[f->arg] >= 0) {
        snprintf(msg, cap, "two processes joined as rank %d", f->arg);
        return msg;
    }
    return NULL;
}

/* The complete HELLO of pending connection i: of another job, dropped with
 * an error frame; else it has arrived, and joins as its rank or is refused
 * (the first refusal recorded in ra->err, which it is sent). */
static void take_hello(magi_symm_sock *s, root_arrivals *ra, uint32_t i, const frame *f) {
    pending *p = &ra->pend[i];
    int fd = p->fd;
    if (memcmp(p->buf + sizeof *f, s->job, 32)) {
        const char *m = "rendezvous: this socket belongs to another job (different job id)";
        send_frame(fd, F_ERROR, MAGI_ERR_MISMATCH, 0, m, strlen(m), now_ms() + 200);
        drop_pending(ra->pend, &ra->np, i);
        return;
    }
    ra->pend[i] = ra->pend[--ra->np];
    ra->arrived++;
    char msg[256];
    const char *why = hello_refusal(s, f, msg, sizeof msg);
    if (why) {
        if (!ra->err[0]) snprintf(ra->err, sizeof ra->err, "rendezvous at '%s': %s", s->path, why);
        send_frame(fd, F_ERROR, MAGI_ERR_MISMATCH, 0, ra->err, strlen(ra->err), now_ms() + 2000);
        close(fd);
        return;
    }
    s->fds[f->arg] = fd;
    ra->joined++;
}

/* Read what pending connection i sent (never blocking): a closed one, or
 * one whose first bytes are not our HELLO frame, is dropped; a complete
 * HELLO is taken. */
static void read_pending(magi_symm_sock *s, root_arrivals *ra, uint32_t i) {
    pending *p = &ra->pend[i];
    ssize_t k = recv(p->fd, p->buf + p->got, sizeof p->buf - p->got, MSG_DONTWAIT);
    if (k < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (k <= 0) {
        drop_pending(ra->pend, &ra->np, i);
        return;
    }
    p->got += (size_t)k;
    frame f;
    memcpy(&f, p->buf, p->got < sizeof f ? p->got : sizeof f);
    if (p->got >= sizeof f && (f.magic != FRAME_MAGIC || f.kind != F_HELLO || f.len != 32)) {
        drop_pending(ra->pend, &ra->np, i); /* not one of ours */
        return;
    }
    if (p->got < sizeof p->buf) return;
    take_hello(s, ra, i, &f);
}

/* Accept every waiting connection as pending, with its HELLO deadline; one
 * from another user is never a rank of ours. */
static void accept_pending(magi_symm_sock *s, root_arrivals *ra) {
    for (;;) {
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) break;
        if (peer_is_us(fd) != 0) {
            close(fd);
            continue;
        }
        if (ra->np == MAX_PENDING) drop_pending(ra->pend, &ra->np, 0); /* the oldest silent one */
        memset(&ra->pend[ra->np], 0, sizeof ra->pend[ra->np]);
        ra->pend[ra->np].fd = fd;
        ra->pend[ra->np].until = now_ms() + HELLO_MS;
        ra->np++;
    }
}

/* Accept until every rank has arrived (or the deadline): a bad arrival is
 * answered with the error at once, the good ones by root_verdict, so that
 * every process that shows up learns the verdict. Connections are served
 * together (poll), each with its own HELLO deadline, so a silent or slow
 * one never holds up the others. A HELLO from another user, of another
 * job, or garbage is dropped without counting. */
static void wait_for_ranks(magi_symm_sock *s, root_arrivals *ra, int64_t deadline) {
    while (ra->arrived < s->world) {
        int64_t now = now_ms(), left = deadline - now;
        if (left <= 0) break;
        for (uint32_t i = 0; i < ra->np;)
            if (ra->pend[i].until <= now) drop_pending(ra->pend, &ra->np, i);
            else i++;
        ra->pf[0].fd = s->listen_fd;
        ra->pf[0].events = POLLIN;
        ra->pf[0].revents = 0;
        for (uint32_t i = 0; i < ra->np; i++) {
            ra->pf[i + 1].fd = ra->pend[i].fd;
            ra->pf[i + 1].events = POLLIN;
            ra->pf[i + 1].revents = 0;
        }
        int r = poll(ra->pf, ra->np + 1, left > 200 ? 200 : (int)left);
        if (r <= 0) continue;
        /* Downwards: a connection dropped or taken at i is replaced by the
         * last one, which has been read already. */
        for (uint32_t i = ra->np; i-- > 0;)
            if (ra->pf[i + 1].revents) read_pending(s, ra, i);
        if (ra->pf[0].revents & POLLIN) accept_pending(s, ra);
    }
}

/* After the arrivals: the joined connections back in blocking mode for the
 * collectives, then the verdict sent to every joined rank - the first
 * refusal, the ranks that did not join in time, or the release. */
static magi_status root_verdict(magi_symm_sock *s, const root_arrivals *ra, int64_t deadline) {
    magi_status st;
    for (uint32_t r = 1; r < s->world; r++)
        if (s->fds[r] >= 0) fcntl(s->fds[r], F_SETFL, fcntl(s->fds[r], F_GETFL) & ~O_NONBLOCK);
    if (ra->err[0]) {
        st = magi_set_error(MAGI_ERR_MISMATCH, "%s", ra->err);
        root_broadcast_error(s, st, ra->err, UINT32_MAX);
        return st;
    }
    if (ra->joined < s->world) {
        char list[512];
        size_t o = 0;
        list[0] = 0;
        for (uint32_t r = 1; r < s->world && o < sizeof list - 16; r++)
            if (s->fds[r] < 0) o += (size_t)snprintf(list + o, sizeof list - o, "%s%u", o ? ", " : "", r);
        st = magi_set_error(MAGI_ERR_TIMEOUT, "rendezvous at '%s' timed out after %u ms: rank(s) %s did not join",
                            s->path, s->timeout_ms, list);
        root_broadcast_error(s, st, magi_last_error(), UINT32_MAX);
        return st;
    }
    /* Everyone is here: release them. */
    for (uint32_t r = 1; r < s->world; r++) {
        int rr = send_frame(s->fds[r], F_DATA, 0, 0, NULL, 0, deadline + 2000);
        if (rr) {
            st = magi_set_error(io_status(rr), "rendezvous at '%s': rank %u: %s", s->path, r, io_what(rr));
            root_broadcast_error(s, st, magi_last_error(), r);
            return st;
        }
    }
    return MAGI_OK;
}

/* Rank 0: listen, wait for the ranks, send the verdict; the socket's name
 * is removed whatever the outcome. */
static magi_status root_open(magi_symm_sock *s, int64_t deadline) {
    magi_status st = root_listen(s);
    if (st) return st;
    root_arrivals ra;
    memset(&ra, 0, sizeof ra);
    ra.arrived = ra.joined = 1;
    ra.pend = calloc(MAX_PENDING, sizeof *ra.pend);
    ra.pf = calloc(MAX_PENDING + 1, sizeof *ra.pf);
    if (!ra.pend || !ra.pf) {
        st = magi_set_error(MAGI_ERR_NOMEM, "out of memory");
    } else {
        wait_for_ranks(s, &ra, deadline);
        st = root_verdict(s, &ra, deadline);
    }
    for (uint32_t i = 0; i < ra.np; i++) close(ra.pend[i].fd);
    free(ra.pend);
    free(ra.pf);
    unlink(s->bind_path);
    close(s->listen_fd);
    s->listen_fd = -1;
    return st;
}

static magi_status peer_open(magi_symm_sock *s, int64_t deadline) {
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    memcpy(a.sun_path, s->bind_path, strlen(s->bind_path) + 1);
    for (;;) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) return magi_set_error(MAGI_ERR_IO, "rendezvous: socket(): %s", strerror(errno));
        if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
            if (peer_is_us(fd) != 0) {
                close(fd);
                return magi_set_error(MAGI_ERR_INVALID_ARG,
                                      "rendezvous at '%s': the listening process runs as another user", s->path);
            }
            s->fds[0] = fd;
            break;
        }
        int e = errno;
        close(fd);
        if (e != ENOENT && e != ECONNREFUSED && e != EAGAIN && e != EINTR)
            return magi_set_error(MAGI_ERR_IO, "rendezvous: cannot connect to '%s': %s", s->path, strerror(e));
        if (now_ms() >= deadline)
            return magi_set_error(MAGI_ERR_TIMEOUT,
                                  "rendezvous at '%s' timed out after %u ms: rank 0 did not open it", s->path,
                                  s->timeout_ms);
        struct timespec t = {0, 5 * 1000 * 1000};
        nanosleep(&t, NULL);
    }
    int r = send_frame(s->fds[0], F_HELLO, (int32_t)s->rank, s->world, s->job, 32, deadline);
    if (r) return magi_set_error(io_status(r), "rendezvous at '%s': hello to rank 0: %s", s->path, io_what(r));
    frame f;
    uint8_t *pl = NULL;
    /* Rank 0 answers when the last rank has joined (its own deadline). */
    r = recv_frame(s->fds[0], &f, &pl, deadline + 5000);
    magi_status st = MAGI_OK;
    if (r)
        st = magi_set_error(io_status(r), "rendezvous at '%s': waiting for rank 0: %s", s->path, io_what(r));
    else if (f.kind == F_ERROR) {
        st = error_from_frame(&f, pl, "rendezvous");
        s->failed = 1;
    } else if (f.kind != F_DATA)
        st = magi_set_error(MAGI_ERR_IO, "rendezvous at '%s': unexpected frame from rank 0", s->path);
    free(pl);
    return st;
}

magi_status magi_symm_sock_open(magi_symm_sock **out, const char *dir, const char *name,
                                const uint8_t job[32], uint32_t rank, uint32_t world, uint32_t timeout_ms) {
    magi_status st = MAGI_OK;
    magi_symm_sock *s = NULL;
    if (!out || !dir || !*dir || !name || world == 0 || rank >= world)
        return magi_set_error(MAGI_ERR_INVALID_ARG, "rendezvous: bad arguments (dir '%s', rank %u, world %u)",
                              dir ? dir : "(null)", rank, world);
    *out = NULL;
    s = calloc(1, sizeof *s);
    if (!s) return magi_set_error(MAGI_ERR_NOMEM, "out of memory");
    s->rank = rank;
    s->world = world;
    s->timeout_ms = timeout_ms ? timeout_ms : DEFAULT_TIMEOUT_MS;
    s->listen_fd = -1;
    s->dirfd = -1;
    if (job) memcpy(s->job, job, 32);
    s->fds = malloc(sizeof *s->fds * world);
    if (!s->fds) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
    for (uint32_t r = 0; r < world; r++) s->fds[r] = -1;
    if (asprintf(&s->path, "%s/%s", dir, name) < 0) {
        s->path = NULL;
        MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
    }
    if (strlen(s->path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
        MAGI_FAIL(MAGI_ERR_INVALID_ARG, "rendezvous: socket path '%s' is longer than %zu bytes",
                  s->path, sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
    if (world > 1) {
        /* The socket lives in a directory only we can enter (owner us, mode
         * 0700, no symlink), reached through the checked descriptor. */
        st = magi_dir_open(dir, 1, MAGI_DIR_PRIVATE, &s->dirfd);
        if (st) {
            magi_error_prefix(st, "rendezvous directory");
            goto cleanup;
        }
        if (asprintf(&s->bind_path, "/proc/self/fd/%d/%s", s->dirfd, name) < 0) {
            s->bind_path = NULL;
            MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
        }
        struct stat pb;
        if (strlen(s->bind_path) >= sizeof(((struct sockaddr_un *)0)->sun_path) || stat(s->bind_path, &pb) != 0 ||
            !S_ISDIR(pb.st_mode)) {
            /* no /proc: the checked path itself */
            free(s->bind_path);
            s->bind_path = strdup(s->path);
            if (!s->bind_path) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
        }
        int64_t deadline = now_ms() + s->timeout_ms;
        MAGI_CHECK(rank == 0 ? root_open(s, deadline) : peer_open(s, deadline));
    }
    *out = s;
    s = NULL;
cleanup:
    magi_symm_sock_close(s);
    return st;
}

magi_status magi_symm_sock_allgather(magi_symm_sock *s, const void *mine, size_t len,
                                     uint8_t **all, size_t **offs) {
    magi_status st = MAGI_OK;
    uint8_t **parts = NULL, *res = NULL, *pl = NULL;
    size_t *lens = NULL, *o = NULL;
    if (!s || !all || !offs || (len && !mine))
        return magi_set_error(MAGI_ERR_INVALID_ARG, "rendezvous all-gather: NULL argument");
    *all = NULL;
    *offs = NULL;
    if (s->failed)
        return magi_set_error(MAGI_ERR_INVALID_ARG, "rendezvous at '%s': an earlier collective failed", s->path);
    if (len > MAX_PAYLOAD) return magi_set_error(MAGI_ERR_LIMIT, "rendezvous record of %zu bytes is too large", len);
    int64_t deadline = now_ms() + s->timeout_ms;
    o = calloc(s->world + 1, sizeof *o);
    if (!o) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
    if (s->world == 1) {
        res = malloc(len ? len : 1);
        if (!res) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
        if (len) memcpy(res, mine, len);
        o[1] = len;
    } else if (s->rank == 0) {
        parts = calloc(s->world, sizeof *parts);
        lens = calloc(s->world, sizeof *lens);
        if (!parts || !lens) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
        lens[0] = len;
        for (uint32_t r = 1; r < s->world; r++) {
            frame f;
            int rr = recv_frame(s->fds[r], &f, &parts[r], deadline);
            if (rr) {
                st = magi_set_error(io_status(rr), "rendezvous at '%s': waiting for rank %u: %s", s->path, r,
                                    io_what(rr));
                root_broadcast_error(s, st, magi_last_error(), r);
                goto cleanup;
            }
            if (f.kind == F_ERROR) {
                char ctx[64];
                snprintf(ctx, sizeof ctx, "rank %u failed", r);
                st = error_from_frame(&f, parts[r], ctx);
                root_broadcast_error(s, st, magi_last_error(), r);
                goto cleanup;
            }
            lens[r] = (size_t)f.len;
        }
        size_t total = (size_t)(s->world) * 8, tot2;
        for (uint32_t r = 0; r < s->world; r++) {
            if (!magi_add_ok(total, lens[r], &tot2)) MAGI_FAIL(MAGI_ERR_LIMIT, "rendezvous records too large");
            total = tot2;
        }
        res = malloc(total);
        if (!res) MAGI_FAIL(MAGI_ERR_NOMEM, "out of memory");
        size_t at = (size_t)s->world * 8;
        for (uint32_t r = 0; r < s->world; r++) {
            uint64_t l = lens[r];
            memcpy(res + (size_t)r * 8, &l, 8);
            if (lens[r]) memcpy(res + at, r ? parts[r] : mine, lens[r]);
            at += lens[r];
        }
        for (uint32_t r = 1; r < s->world; r++) {
            int rr = send_frame(s->fds[r], F_DATA, 0, 0, res, total, deadline + 2000);
            if (rr) {
                st = magi_set_error(io_status(rr), "rendezvous at '%s': sending to rank %u: %s", s->path, r,
                                    io_what(rr));
                root_broadcast_error(s, st, magi_last_error(), r);
                goto cleanup;
            }
        }
        /* Turn the framed result into the plain layout. */
        memmove(res, res + (size_t)s->world * 8, total - (size_t)s->world * 8);
        for (uint32_t r = 0; r < s->world; r++) o[r + 1] = o[r] + lens[r];
    } else {
        int rr = send_frame(s->fds[0], F_DATA, 0, 0, mine, len, deadline);
        frame f;
        if (rr) {
            /* Rank 0 may have aborted (another rank failed) and closed the
             * connection before our send: its error frame can still be
             * waiting in our receive buffer - report that, not the EPIPE. */
            if (recv_frame(s->fds[0], &f, &pl, now_ms() + 1000) == 0 && f.kind == F_ERROR) {
                s->failed = 1;
                st = error_from_frame(&f, pl, "rendezvous");
                goto cleanup;
            }
            MAGI_FAIL(io_status(rr), "rendezvous at '%s': sending to rank 0: %s", s->path, io_what(rr));
        }
        rr = recv_frame(s->fds[0], &f, &pl, deadline + 5000);
        if (rr) MAGI_FAIL(io_status(rr), "rendezvous at '%s': waiting for rank 0: %s", s->path, io_what(rr));
        if (f.kind == F_ERROR) {
            s->failed = 1;
            st = error_from_frame(&f, pl, "rendezvous");
            goto cleanup;
        }
        size_t n = (size_t)f.len, hdr = (size_t)s->world * 8;
        if (f.kind != F_DATA || n < hdr) MAGI_FAIL(MAGI_ERR_IO, "rendezvous at '%s': bad reply from rank 0", s->path);
        for (uint32_t r = 0; r < s->world; r++) {
            uint64_t l;
            memcpy(&l, pl + (size_t)r * 8, 8);
            if (l > n - hdr - o[r]) MAGI_FAIL(MAGI_ERR_IO, "rendezvous at '%s': bad reply from rank 0", s->path);
            o[r + 1] = o[r] + (size_t)l;
        }
        if (o[s->world] != n - hdr) MAGI_FAIL(MAGI_ERR_IO, "rendezvous at '%s': bad reply from rank 0", s->path);
        memmove(pl, pl + hdr, n - hdr);
        res = pl;
        pl = NULL;
    }
    *all = res;
    *offs = o;
    res = NULL;
    o = NULL;
cleanup:
    if (parts)
        for (uint32_t r = 0; r < s->world; r++) free(parts[r]);
    free(parts);
    free(lens);
    free(res);
    free(o);
    free(pl);
    return st;
}

magi_status magi_symm_sock_barrier(magi_symm_sock *s) {
    uint8_t *all = NULL;
    size_t *offs = NULL;
    magi_status st = magi_symm_sock_allgather(s, NULL, 0, &all, &offs);
    free(all);
    free(offs);
    return st;
}

void magi_symm_sock_close(magi_symm_sock *s) {
    if (!s) return;
    if (s->fds)
        for (uint32_t r = 0; r < s->world; r++)
            if (s->fds[r] >= 0) close(s->fds[r]);
    if (s->listen_fd >= 0) {
        close(s->listen_fd);
        unlink(s->bind_path);
    }
    if (s->dirfd >= 0) close(s->dirfd);
    free(s->fds);
    free(s->path);
    free(s->bind_path);
    free(s);
}
