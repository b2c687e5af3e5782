/*
 * setup_script.h - the shell script the setup job runs in the sandbox,
 * and the marker it leaves there once every install succeeded.
 *
 * The marker (SETUP_MARKER) says what the sandbox has:
 *
 *   osbfs-setup 1
 *   hash 0123456789abcdef       setup_decl_hash() of the declaration
 *   pkg poppler-utils           one line per item installed: a system
 *   pip3.12 numpy               package, a pip package (for the declared
 *   npm22 tsx                   Python version), an npm package (Node)
 *
 * The sandbox is not trusted: a marker that is too big or not exactly of
 * this form is taken as absent (everything is installed again).
 *
 * Pure: no I/O; fuzzed (tests/fuzz/fuzz_setup.c).
 */
#ifndef OSBFS_SETUP_SCRIPT_H
#define OSBFS_SETUP_SCRIPT_H

#include "ctl_text.h"
#include "setup_decl.h"

#define SETUP_DIR "/tmp/.osbfs/setup"
#define SETUP_MARKER SETUP_DIR "/installed"
/* one line: why the last setup failed (the script writes it) */
#define SETUP_REASON SETUP_DIR "/failed"
#define SETUP_MARKER_MAX ((size_t)256 * 1024)
#define SETUP_ITEMS_MAX 2048

/*
 * setup_marker_parse() - the marker's hash into @ret_hash and its items
 * ("pip3.12 numpy"...) into *ret_items (release with
 * setup_list_release()). -EINVAL for anything else than a well-formed
 * marker, -ENOMEM.
 */
int setup_marker_parse(const char *text, size_t len, char ret_hash[17],
		       struct setup_list *ret_items);

/*
 * setup_script() - the script that checks the interpreters @d declares
 * and installs every item of @d not in @installed (NULL: none), then
 * writes the marker with @hash and the items of both. Appended to @out.
 * *ret_count: how many items it installs. 0 or -ENOMEM.
 */
int setup_script(const struct setup_decl *d, const char *hash,
		 const struct setup_list *installed, struct text *out,
		 size_t *ret_count);

#endif /* OSBFS_SETUP_SCRIPT_H */
