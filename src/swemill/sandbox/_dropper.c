/* swemill's privilege dropper: run ARGV as UID:GID with no capability and no way back.
 *
 * Used inside the bwrap sandbox when swemill runs as root (see _dropper.py): bwrap, still
 * root, has built the mounts; this drops the command to the sandbox user. It does what
 * `setpriv --reuid --regid --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs`
 * does, in a static binary that costs about a third of setpriv's exec.
 *
 *     swemill-drop UID GID COMMAND [ARG...]
 *
 * Exit 126 when a step fails (nothing is run then), 127 when COMMAND cannot be executed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static int fail(const char *what) {
    fprintf(stderr, "swemill-drop: %s: %s\n", what, strerror(errno));
    return 126;
}

static int parse_id(const char *text, unsigned long *out) {
    char *end = NULL;
    errno = 0;
    *out = strtoul(text, &end, 10);
    return errno == 0 && end != text && *end == '\0' && *out != 0 && *out < 4294967295UL;
}

int main(int argc, char **argv) {
    unsigned long uid, gid;
    if (argc < 4 || !parse_id(argv[1], &uid) || !parse_id(argv[2], &gid)) {
        fprintf(stderr, "usage: swemill-drop UID GID COMMAND [ARG...] (ids non-zero)\n");
        return 126;
    }
    /* the bounding set first: dropping from it needs CAP_SETPCAP, gone after setresuid */
    for (int cap = 0; cap <= 63; cap++) {
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL)
            return fail("cannot empty the capability bounding set");
    }
    if (setgroups(0, NULL) != 0) return fail("cannot clear the supplementary groups");
    if (setresgid((gid_t)gid, (gid_t)gid, (gid_t)gid) != 0) return fail("cannot set the gid");
    if (setresuid((uid_t)uid, (uid_t)uid, (uid_t)uid) != 0) return fail("cannot set the uid");
    /* leaving uid 0 cleared the permitted, effective and ambient sets; clear inheritable too */
    struct __user_cap_header_struct head = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof data);
    if (syscall(SYS_capset, &head, data) != 0) return fail("cannot clear the capabilities");
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return fail("cannot set no_new_privs");
    if (getuid() != (uid_t)uid || geteuid() != (uid_t)uid || getegid() != (gid_t)gid)
        return fail("the ids did not change");
    execvp(argv[3], argv + 3);
    fprintf(stderr, "swemill-drop: %s: %s\n", argv[3], strerror(errno));
    return 127;
}
