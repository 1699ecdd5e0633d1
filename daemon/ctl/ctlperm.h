/* SPDX-License-Identifier: MIT */
/*
 * Who may use the control socket: the group whose members may connect (read-only commands), the
 * file modes that let them, and the credentials of a connected client. control.c decides what a
 * client may do with them; this module only asks the system.
 */
#ifndef HAK_CTLPERM_H
#define HAK_CTLPERM_H

#include <stddef.h>
#include <sys/types.h>

/* The credentials the kernel recorded for a UNIX socket's peer when it connected. */
struct ctlperm_peer {
	uid_t uid;
	gid_t gid;
	pid_t pid;
};

/* The gid of group name: 0, or -1 with errno ENOENT (no such group) or the lookup's error. */
int ctlperm_group_gid(const char *name, gid_t *gid);

/*
 * Let group gid connect to the socket at path: owner root (left as it is), group gid, mode 0660.
 * 0, or -1 with errno and a sentence in err; on failure the socket keeps mode 0600.
 */
int ctlperm_share_socket(const char *path, gid_t gid, char *err, size_t errlen);

/*
 * Make the directory of path traversable by group gid (named group, for messages) when it is not
 * already. Only a directory owned by this process whose group is root's or gid itself is changed
 * (group gid, g+x): another group's directory is not taken from it. 0, or -1 with errno and a
 * sentence in err that says how to fix it by hand.
 */
int ctlperm_share_dir(const char *path, gid_t gid, const char *group, char *err, size_t errlen);

/* The credentials of the client connected on fd (SO_PEERCRED): 0, or -1 with errno. */
int ctlperm_peer_get(int fd, struct ctlperm_peer *peer);

/*
 * Whether user uid, whose primary group is gid, belongs to group (its primary group or one of its
 * supplementary groups in the user and group databases): 1 yes, 0 no, -1 with errno when the
 * databases could not be read (a uid without a passwd entry is no member: 0).
 */
int ctlperm_member(uid_t uid, gid_t gid, gid_t group);

#endif
