/*
 * fuzz_setup.c - libFuzzer harness: a setup= file (first byte even) as
 * the mount reads it, and the script made from what it declares; or (odd)
 * a setup marker as the sandbox may hold it, anything at all.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "setup_decl.h"
#include "setup_script.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_names(const struct setup_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		if (!setup_name_valid(l->v[i]) || strchr(l->v[i], '\''))
			__builtin_trap(); /* a name the script may not hold */
}

static void decl(const char *text, size_t len)
{
	struct setup_decl d;
	struct text script = { 0 };
	char msg[400];
	char hash[17];
	size_t count;

	int rc = setup_decl_parse(text, len, "f.yaml", &d, msg, sizeof(msg));
	if (rc) {
		if (rc != -ENOMEM && strncmp(msg, "f.yaml:", 7) != 0)
			__builtin_trap(); /* refused without FILE:LINE: */
		return;
	}
	check_names(&d.sys);
	check_names(&d.pip);
	check_names(&d.npm);
	if ((d.python_version && !setup_version_valid(d.python_version)) ||
	    (d.node_version && !setup_version_valid(d.node_version)))
		__builtin_trap();
	setup_decl_hash(&d, hash);
	if (setup_script(&d, hash, NULL, &script, &count) == 0 &&
	    count != d.sys.n + d.pip.n + d.npm.n)
		__builtin_trap(); /* nothing installed: all of it is new */
	text_release(&script);
	setup_decl_release(&d);
}

static void marker(const char *text, size_t len)
{
	struct setup_list items;
	char hash[17];

	if (setup_marker_parse(text, len, hash, &items) != 0)
		return;
	if (strlen(hash) != 16 || items.n > SETUP_ITEMS_MAX)
		__builtin_trap();
	for (size_t i = 0; i < items.n; i++)
		if (strchr(items.v[i], '\n') || strchr(items.v[i], '\''))
			__builtin_trap(); /* an item the script may not hold */
	setup_list_release(&items);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (data[0] & 1)
		marker((const char *)data + 1, size - 1);
	else
		decl((const char *)data + 1, size - 1);
	return 0;
}
