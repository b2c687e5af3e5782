/*
 * ops.h - the FUSE low-level operations and the helpers they share.
 *
 * ops.c       lookup, getattr, setattr, forget, access, statfs, init
 * ops_dir.c   opendir/readdir(plus)/releasedir, mkdir, rmdir, unlink,
 *             rename, symlink, readlink, link
 * ops_file.c  open, create, read, write, flush, release, fsync
 *
 * Every op reads as: validate -> cache lookup -> remote call -> cache
 * update -> reply. Attributes and listings are the node table's
 * (node.h); file content is the cache layer's, reached through its
 * calls only (cache.h). Nothing is held locked across a remote call
 * but fs->path_lock (osbfs.h).
 */
#ifndef OSBFS_OPS_H
#define OSBFS_OPS_H

#include "osbfs.h"
#include "owners.h"
#include "remote.h"

/* The operation table (ops.c fills its part, then the others'). */
struct fuse_lowlevel_ops osbfs_make_ops(void);
void op_dir_register(struct fuse_lowlevel_ops *ops);
void op_file_register(struct fuse_lowlevel_ops *ops);
void op_xattr_register(struct fuse_lowlevel_ops *ops);

static inline struct osbfs *req_fs(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/*
 * Whether @n's attributes are the local ones (nodes lock held): it has
 * changes the sandbox does not have yet, or it is an orphan, a file
 * unlinked while open, which lives on in the cache only (as on any local
 * filesystem, an open file outlives its name until the last close; its
 * data never goes to the sandbox again).
 */
static inline bool node_has_local(struct osbfs *fs, const struct node *n)
{
	return n->cf && (n->unlinked || cache_is_dirty(fs->cache, n->cf));
}

/* A held node: the node (with a ref) and its sandbox path (NULL for an
 * orphan, from held_inode only). held_put() is safe on a held that a
 * failed held_*() call left empty. */
struct held {
	struct node *n;
	char *path;
};
/* Takes a ref on node @ino and its path. -ENOENT if unknown/unlinked. */
int held_get(struct osbfs *fs, fuse_ino_t ino, struct held *ret);
/* The same, but an unlinked node still held by the kernel (an open file
 * whose name is gone) is given too, with a NULL path: the ops that work on
 * an open file (getattr, setattr, access, open) serve it locally. */
int held_inode(struct osbfs *fs, fuse_ino_t ino, struct held *ret);
/* The child @name of @parent (made if missing), with a ref and path. */
int held_child(struct osbfs *fs, fuse_ino_t parent, const char *name,
	       struct held *ret);
void held_put(struct osbfs *fs, struct held *h);

/* Whether a name the sandbox lists can be shown: -ENAMETOOLONG,
 * -EILSEQ (not UTF-8), -EINVAL ("", ".", ".."). */
int name_valid(const char *name);
/* Whether @name holds U+FFFD, which is what execd sends in place of the
 * bytes of a name that is not valid UTF-8 (docs/SERVER.md §4): the
 * sandbox's name is another, that no request can reach. */
bool name_lossy(const char *name);
/* Checks a new name: name_valid(), and -EILSEQ for a lossy one (it would
 * read back as one the sandbox could not send). */
int name_check(const char *name);

/* The attributes of @n, fetched if stale. -ENOENT if it is gone. The
 * special mode bits are those known (special.h), maybe none yet. */
/* Says that the file @path (inode @ino) changed in the sandbox while
 * open, and has the kernel forget its pages. */
void tell_changed(struct osbfs *fs, fuse_ino_t ino, const char *path);
int node_attr(struct osbfs *fs, struct held *h, struct fattr *ret);
/* The same, with the special bits learned if not known (by a command in
 * place of the file API's stat): what a reply to the kernel's getattr,
 * and a write that sends the mode back, need. */
int node_attr_bits(struct osbfs *fs, struct held *h, struct fattr *ret);
/* Whether @n shows special bits that are not known (nodes lock held). */
bool node_bits_unknown(struct osbfs *fs, const struct node *n);
/* The kernel may keep @n's attributes this long (nodes lock held): not at
 * all while its special bits are not known, so that it asks (getattr)
 * when it needs them, for a stat or a permission check. */
double attr_timeout_of(struct osbfs *fs, const struct node *n);
/* struct stat for @n (nodes lock held): cache data overrides. */
void node_stat(struct osbfs *fs, const struct node *n, struct stat *st);
/* Replies with an entry for @n (takes a lookup reference). */
void reply_node_entry(fuse_req_t req, struct osbfs *fs, struct node *n);
/* Replies a negative entry (the name does not exist). */
void reply_negative(fuse_req_t req, struct osbfs *fs);

/* The directory @h's listing, fetched if stale, with its subtree when
 * that is small; children updated (listing.c). */
int dir_load(struct osbfs *fs, struct held *h);
/* The same, fetched unless a listing asked for at or after @since
 * (monotonic ms; < 0: one not yet expired) is there. */
int dir_refresh(struct osbfs *fs, struct held *h, long long since);
/* A change made under directory @parent: its listing stays valid with
 * @child in it (or out of it, with @child NULL), and an answer asked for
 * before it says nothing of @child. Nodes lock held. */
void dir_changed(struct osbfs *fs, struct node *parent, struct node *child);
/* Name @name of @parent was just removed or renamed away, in the sandbox
 * too (after dir_changed()): an answer asked for before does not bring
 * it back, and a lookup of it is answered without asking for a while
 * (an editor makes its temporary file again at once). Nodes lock held. */
void dir_name_gone(struct osbfs *fs, struct node *parent, const char *name);

/* The sandbox says @n's name is gone (a stat found nothing): its
 * extended attributes, and those below it, go (ops_xattr.c). Nodes lock
 * held. */
void xattr_name_gone(struct osbfs *fs, struct node *n);

/* Downloads whatever of [off, off+len) the cache file lacks. */
int file_fetch(struct osbfs *fs, struct held *h, struct cfile *cf, int64_t off,
	       int64_t len);
/*
 * file_prepare() - @h's cfile (made if missing), ready for use: when it
 * has no local changes, its validator and size are the sandbox's (@a),
 * and content cached for another version is dropped. *ret_keep tells
 * whether cached content is still good (the kernel may keep its pages).
 */
struct cfile *file_prepare(struct osbfs *fs, struct held *h,
			   const struct fattr *a, bool *ret_keep);
/* Makes the whole file local (before a write or a truncate): -EFBIG or
 * -ENOSPC, said in the log, when the cache cannot hold it whole
 * (cache_room_whole). */
int file_make_complete(struct osbfs *fs, struct held *h, struct cfile *cf);
/* Logs that @what (a write to, a truncate of) node @n, taking it to
 * @size bytes, failed with EFBIG: past cache_max_size. */
void log_too_big(struct osbfs *fs, struct node *n, const char *what,
		 int64_t size);
/* Records a change of @h's content (@meta: of its mode or times) for
 * upload, in its journal record; nothing for an orphan, whose data never
 * goes to the sandbox. */
int file_changed(struct osbfs *fs, struct held *h, struct cfile *cf, bool meta);
/*
 * node_changed_here() - the sandbox's @n was changed by us (a mode,
 * times, a move), which left its ctime at @ctime, or at a value not known
 * if @ctime is NULL (the sandbox's next answer says it). An answer asked
 * for before now is older than what we know; the cached content's
 * validator follows, so our own change is never taken for someone
 * else's, and so do the special bits known (special_changed). Nodes lock
 * held.
 */
void node_changed_here(struct osbfs *fs, struct node *n,
		       const struct timespec *ctime);
/* Before @h's name goes away (unlink, rename over it): if the file is
 * open, its content is made whole locally, so its readers can go on
 * reading it as an orphan. Best effort: what cannot be fetched reads as
 * EIO later. */
void file_keep_for_readers(struct osbfs *fs, struct held *h);

/* The owner and group new node @n made by the caller of @req is to have,
 * as the sandbox is to name them (owners.h): the caller's, or in a
 * setgid directory the directory's group, as Linux does; "" for the
 * mount's user (root's there, what execd gives anyway). May read the
 * sandbox's tables: no lock held. */
void ops_maker(fuse_req_t req, struct osbfs *fs, struct node *n, char *owner,
	       char *group);

/* Drops every cache, also the kernel's (from a thread that is not
 * serving a request). */
void fs_invalidate_all(struct osbfs *fs);

#endif /* OSBFS_OPS_H */
