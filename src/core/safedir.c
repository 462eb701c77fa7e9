/* Directories other users must not control (rendezvous, cache): opened
 * without following a symlink and checked on the open descriptor, so the
 * checked directory is the one every later openat() works in. */
#include "internal.h"
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static magi_status check_dir(int fd, const char *what, int policy) {
    struct stat sb;
    if (fstat(fd, &sb) != 0) return magi_set_error(MAGI_ERR_IO, "%s: cannot stat: %s", what, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) return magi_set_error(MAGI_ERR_INVALID_ARG, "%s: not a directory", what);
    uid_t me = geteuid();
    unsigned mode = (unsigned)sb.st_mode & 07777u;
    if (policy == MAGI_DIR_PRIVATE) {
        if (sb.st_uid != me)
            return magi_set_error(MAGI_ERR_INVALID_ARG,
                                  "%s: owned by uid %u, not by this user (uid %u): refusing a directory "
                                  "another user controls",
                                  what, (unsigned)sb.st_uid, (unsigned)me);
        if (mode & 077u)
            return magi_set_error(MAGI_ERR_INVALID_ARG,
                                  "%s: mode %04o lets other users in (must be 0700)", what, mode);
        return MAGI_OK;
    }
    /* MAGI_DIR_SHARED: ours and writable by us only, or a group-shared
     * directory (group-writable with setgid, like a shared ccache). Never
     * writable by others. */
    if (mode & 002u)
        return magi_set_error(MAGI_ERR_INVALID_ARG, "%s: mode %04o is writable by every user", what, mode);
    int group_shared = (mode & 020u) && (mode & S_ISGID);
    if ((mode & 020u) && !group_shared)
        return magi_set_error(MAGI_ERR_INVALID_ARG,
                              "%s: mode %04o is group-writable without setgid (a shared directory must be "
                              "chmod g+ws)",
                              what, mode);
    if (sb.st_uid != me && !group_shared)
        return magi_set_error(MAGI_ERR_INVALID_ARG,
                              "%s: owned by uid %u, not by this user (uid %u), and not group-shared (g+ws)",
                              what, (unsigned)sb.st_uid, (unsigned)me);
    return MAGI_OK;
}

magi_status magi_fd_check_own(int fd, const char *what) {
    struct stat sb;
    if (fstat(fd, &sb) != 0) return magi_set_error(MAGI_ERR_IO, "%s: cannot stat: %s", what, strerror(errno));
    uid_t me = geteuid();
    unsigned mode = (unsigned)sb.st_mode & 07777u;
    if (sb.st_uid != me)
        return magi_set_error(MAGI_ERR_INVALID_ARG, "%s: owned by uid %u, not by this user (uid %u)", what,
                              (unsigned)sb.st_uid, (unsigned)me);
    if (mode & 022u)
        return magi_set_error(MAGI_ERR_INVALID_ARG, "%s: mode %04o lets %s write it", what, mode,
                              (mode & 002u) ? "every user" : "its group");
    return MAGI_OK;
}

magi_status magi_dir_open_at(int parent, const char *name, const char *what, int create, int policy,
                             int *fd_out) {
    *fd_out = -1;
    if (create) {
        mode_t m = policy == MAGI_DIR_PRIVATE ? 0700 : 0755;
        if (mkdirat(parent, name, m) != 0 && errno != EEXIST)
            return magi_set_error(MAGI_ERR_IO, "%s: cannot create: %s", what, strerror(errno));
    }
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        struct stat lsb;
        if (fstatat(parent, name, &lsb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(lsb.st_mode))
            return magi_set_error(MAGI_ERR_INVALID_ARG, "%s: is a symbolic link (refused)", what);
        return magi_set_error(e == ENOENT ? MAGI_ERR_NOT_FOUND : MAGI_ERR_IO, "%s: cannot open: %s", what,
                              strerror(e));
    }
    magi_status st = check_dir(fd, what, policy);
    if (st) {
        close(fd);
        return st;
    }
    *fd_out = fd;
    return MAGI_OK;
}

magi_status magi_dir_open(const char *path, int create, int policy, int *fd_out) {
    return magi_dir_open_at(AT_FDCWD, path, path, create, policy, fd_out);
}
