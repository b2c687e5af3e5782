/*
 * linkmap.h - the target readlink shows for a symlink of the sandbox.
 *
 * The host's kernel resolves every symlink of the mount, on the host: a
 * target the sandbox stored as "/home/user/.ssh/id_rsa", or as enough
 * "../" to climb past the mount point, would reach the host's own files.
 * So a target is shown as a path that resolves inside the mount:
 *
 *  - a target inside DIR (the sandbox directory at the mount point), as a
 *    relative path to the same place in the mount: its leading ".." only
 *    climb to the mount root, and no ".." follows a name (after a name
 *    that is itself a link, such as "d -> .", the kernel's ".." would
 *    climb from wherever that link leads);
 *  - a target outside DIR (or at DIR/CONTROL_DIR, the sandbox's own
 *    directory that the control tree hides), as a path up to the mount
 *    root and then CONTROL_DIR/outside/TARGET, TARGET the target as an
 *    absolute sandbox path. The control tree has no "outside": every such
 *    path ends in ENOENT, and nothing can be made there.
 *
 * "." and ".." of a target are taken lexically: "a/../b" is "b", even if
 * the sandbox would resolve "a" through a link. Every link of the mount is
 * shown this way, so a path through several links stays inside too.
 */
#ifndef OSBFS_LINKMAP_H
#define OSBFS_LINKMAP_H

/*
 * link_map() - the target shown for the symlink at sandbox path @link
 * (absolute, below @root) whose stored target is @target; @root is DIR,
 * @control_dir the control tree's name.
 * Writes a malloc'd string to *ret (caller frees) only on success.
 * Returns 0, -EINVAL (@link is not below @root), -ENAMETOOLONG (the
 * result would not fit PATH_MAX) or -ENOMEM. Pure: no I/O, no locks.
 */
int link_map(const char *target, const char *link, const char *root,
	     const char *control_dir, char **ret);

#endif /* OSBFS_LINKMAP_H */
