/* Makes one system call, named by its argument, that busybox cannot make,
 * and exits 0 if the kernel let it through, 1 if it was refused (the errno
 * on stderr). Built static by tests/tests/security_probe.rs and bound into
 * the probe container read-only. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/syscall.h>
#include <unistd.h>

static long call(const char *name) {
    if (strcmp(name, "personality") == 0) /* not one of the five allowed */
        return personality(ADDR_NO_RANDOMIZE);
    if (strcmp(name, "keyctl") == 0) /* KEYCTL_JOIN_SESSION_KEYRING */
        return syscall(SYS_keyctl, 1, 0);
    if (strcmp(name, "kcmp") == 0) /* KCMP_VM of itself and itself */
        return syscall(SYS_kcmp, getpid(), getpid(), 1, 0, 0);
    if (strcmp(name, "get_mempolicy") == 0)
        return syscall(SYS_get_mempolicy, 0, 0, 0, 0, 0);
    fprintf(stderr, "unknown probe %s\n", name);
    return -2;
}

int main(int argc, char **argv) {
    if (argc != 2)
        return 2;
    long r = call(argv[1]);
    if (r == -2)
        return 2;
    if (r < 0) {
        fprintf(stderr, "%s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    return 0;
}
