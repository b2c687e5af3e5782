/*
 * test_config.c - the settings file reader and editor (config.c): what
 * the official CLI writes is read, everything else is refused with its
 * line, a set keeps every comment, and the layers' order holds.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "osb.h"
#include "test_check.h"

static const char good[] = "# a comment\n"
			   "\n"
			   "[connection]\n"
			   "api_key = \"k\\\"ey\\u00e9\"   # trailing comment\n"
			   "domain = 'localhost:9090'\n"
			   "protocol = \"https\"\r\n"
			   "request_timeout = 45\n"
			   "use_server_proxy = true\n"
			   "\n"
			   "[output]\n"
			   "color = false\n"
			   "format = \"json\"\n"
			   "\n"
			   "[ defaults ]\n"
			   "image = \"python:3.12\"\n"
			   "timeout = \"30m\"\n"
			   "[elsewhere]\n"
			   "list_unknown = 3\n";

static void test_good(void)
{
	struct osb_cfgfile f;
	struct osb_error err;
	int rc = osb_cfgfile_parse("c.toml", good, &f, &err);
	CHECK(rc == 0, "good file: %d %s", rc, rc ? err.message : "");
	if (rc)
		return;
	CHECK(strcmp(f.api_key, "k\"ey\xc3\xa9") == 0, "api_key %s", f.api_key);
	CHECK(strcmp(f.domain, "localhost:9090") == 0, "domain");
	CHECK(strcmp(f.protocol, "https") == 0, "protocol (CRLF line)");
	CHECK(f.request_timeout_s == 45, "request_timeout");
	CHECK(f.use_server_proxy == 1, "use_server_proxy");
	CHECK(strcmp(f.image, "python:3.12") == 0, "image");
	CHECK(strcmp(f.timeout, "30m") == 0, "timeout");
	osb_cfgfile_release(&f);
	CHECK(f.api_key == NULL, "released");
}

static void test_bad(void)
{
	static const struct {
		const char *text;
		const char *msg; /* the end of the message */
	} bad[] = {
		{ "[connection]\ndomain = localhost\n",
		  "c.toml:2: a value that is not a string, an integer or a "
		  "boolean" },
		{ "[connection]\ndomain = \"x\n",
		  "c.toml:2: a string without its closing quote" },
		{ "domain\n", "c.toml:1: a key without '='" },
		{ "[connection\n",
		  "c.toml:1: a section header that is not [name]" },
		{ "[[servers]]\n",
		  "c.toml:1: an array of tables (not supported here)" },
		{ "[a.b]\n", "c.toml:1: a section header that is not [name]" },
		{ "a.b = 1\n", "c.toml:1: a dotted key (not supported here)" },
		{ "\"a\" = 1\n",
		  "c.toml:1: a quoted key (not supported here)" },
		{ "x = 1.5\n", "c.toml:1: a value that is not a string, an "
			       "integer or a boolean" },
		{ "x = [1]\n", "c.toml:1: a value that is not a string, an "
			       "integer or a boolean" },
		{ "x = 1 2\n", "c.toml:1: more after the value" },
		{ "x = \"a\" b\n", "c.toml:1: more after the value" },
		{ "x = \"\"\"a\"\"\"\n",
		  "c.toml:1: a multi-line string (not supported here)" },
		{ "x = \"\\q\"\n", "c.toml:1: an unknown escape in a string" },
		{ "x = 012\n", "c.toml:1: an integer with a leading zero" },
		{ "x =\n", "c.toml:1: a key without a value" },
		{ "\n\n[connection]\nrequest_timeout = \"30\"\n",
		  "c.toml:4: connection.request_timeout must be an integer" },
		{ "[connection]\nrequest_timeout = 0\n",
		  "c.toml:2: connection.request_timeout must be a positive "
		  "number of seconds" },
		{ "[connection]\nuse_server_proxy = 1\n",
		  "c.toml:2: connection.use_server_proxy must be true or "
		  "false" },
		{ "[defaults]\nimage = 3\n",
		  "c.toml:2: defaults.image must be a string" },
		{ "[connection]\ndomain = \"a\"\ndomain = \"b\"\n",
		  "c.toml:3: a key given twice" },
		{ "[a]\n[b]\n[a]\n", "c.toml:3: a section given twice" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct osb_cfgfile f;
		struct osb_error err = { 0 };
		int rc = osb_cfgfile_parse("c.toml", bad[i].text, &f, &err);
		CHECK(rc == -EINVAL, "bad %zu: rc %d", i, rc);
		if (rc == 0) {
			osb_cfgfile_release(&f);
			continue;
		}
		CHECK(strcmp(err.message, bad[i].msg) == 0,
		      "bad %zu: \"%s\", not \"%s\"", i, err.message,
		      bad[i].msg);
	}
}

static void test_duration(void)
{
	static const struct {
		const char *s;
		long secs; /* -1: refused */
	} d[] = {
		{ "90", 90 },      { "90s", 90 },  { "10m", 600 },
		{ "1h30m", 5400 }, { "2h", 7200 }, { "1h30m45s", 5445 },
		{ "none", 0 },     { "NONE", 0 },  { "", -1 },
		{ "10x", -1 },     { "m", -1 },    { "30m1h", -1 },
		{ "-5", -1 },      { "1.5h", -1 }, { "10mm", -1 },
	};
	for (size_t i = 0; i < sizeof(d) / sizeof(d[0]); i++) {
		long v = -7;
		int rc = osb_duration_parse(d[i].s, &v);
		if (d[i].secs < 0)
			CHECK(rc == -EINVAL, "duration \"%s\" accepted",
			      d[i].s);
		else
			CHECK(rc == 0 && v == d[i].secs,
			      "duration \"%s\": %d %ld", d[i].s, rc, v);
	}
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	char *s = calloc(1, 65536);
	size_t n = s ? fread(s, 1, 65535, f) : 0;
	(void)n;
	fclose(f);
	return s;
}

static void test_set(void)
{
	char dir[] = "/tmp/osb-test-config-XXXXXX";
	char path[256];
	struct osb_error err;
	struct osb_cfgfile f;
	struct stat st;

	if (!mkdtemp(dir)) {
		CHECK(0, "mkdtemp");
		return;
	}
	snprintf(path, sizeof(path), "%s/sub/config.toml", dir);
	CHECK(osb_cfgfile_init(path, false, &err) == 0, "init: %s",
	      err.message);
	CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "init mode");
	CHECK(osb_cfgfile_init(path, false, &err) == -EEXIST, "init twice");
	CHECK(osb_cfgfile_init(path, true, &err) == 0, "init --force");
	CHECK(osb_cfgfile_set(path, "connection.domain", "h:1", &err) == 0,
	      "set domain: %s", err.message);
	CHECK(osb_cfgfile_set(path, "connection.domain", "h:2", &err) == 0,
	      "set domain again: %s", err.message);
	CHECK(osb_cfgfile_set(path, "connection.request_timeout", "12", &err) ==
		      0,
	      "set request_timeout: %s", err.message);
	CHECK(osb_cfgfile_set(path, "connection.request_timeout", "soon",
			      &err) == -EINVAL,
	      "set request_timeout soon");
	CHECK(osb_cfgfile_set(path, "connection.use_server_proxy", "yes",
			      &err) == 0,
	      "set use_server_proxy: %s", err.message);
	CHECK(osb_cfgfile_set(path, "defaults.image", "a \"b\"\\c", &err) == 0,
	      "set image: %s", err.message);
	CHECK(osb_cfgfile_set(path, "extra.thing", "x", &err) == 0,
	      "set a new section: %s", err.message);
	CHECK(osb_cfgfile_set(path, "nodot", "x", &err) == -EINVAL, "no dot");
	CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "set mode");
	char *text = slurp(path);
	if (!text) {
		CHECK(0, "cannot read %s", path);
		return;
	}
	CHECK(strstr(text, "# domain = \"localhost:8080\"\ndomain = \"h:2\"\n"),
	      "the comment kept, the line after it: %s", text);
	CHECK(strstr(text, "\n[extra]\nthing = \"x\"\n"), "new section: %s",
	      text);
	CHECK(strstr(text, "[defaults]\n") && strstr(text, "# timeout ="),
	      "comments kept: %s", text);
	free(text);
	int rc = osb_cfgfile_load(path, &f, &err);
	CHECK(rc == 0, "load after set: %s", err.message);
	if (!rc) {
		CHECK(f.exists && strcmp(f.domain, "h:2") == 0, "domain");
		CHECK(f.request_timeout_s == 12 && f.use_server_proxy == 1,
		      "types");
		CHECK(strcmp(f.image, "a \"b\"\\c") == 0, "image %s", f.image);
		CHECK(!f.key_exposed, "no key");
		osb_cfgfile_release(&f);
	}
	/* set on no file (nor directory): made from the template, 0600 */
	char path2[256];
	snprintf(path2, sizeof(path2), "%s/sub2/other.toml", dir);
	CHECK(osb_cfgfile_set(path2, "connection.api_key", "s3cret", &err) == 0,
	      "set on no file: %s", err.message);
	CHECK(stat(path2, &st) == 0 && (st.st_mode & 0777) == 0600,
	      "new file mode");
	chmod(path2, 0644);
	rc = osb_cfgfile_load(path2, &f, &err);
	CHECK(rc == 0 && f.key_exposed && strcmp(f.api_key, "s3cret") == 0,
	      "a readable key is flagged");
	if (!rc)
		osb_cfgfile_release(&f);
	/* no file: no error, nothing set */
	char path3[256];
	snprintf(path3, sizeof(path3), "%s/none.toml", dir);
	rc = osb_cfgfile_load(path3, &f, &err);
	CHECK(rc == 0 && !f.exists && !f.domain && f.use_server_proxy == -1,
	      "missing file");
	if (!rc)
		osb_cfgfile_release(&f);
	unlink(path);
	unlink(path2);
	snprintf(path, sizeof(path), "%s/sub", dir);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/sub2", dir);
	rmdir(path);
	rmdir(dir);
}

static void test_layers(void)
{
	struct osb_cfgfile f;
	struct osb_error err;
	int rc = osb_cfgfile_parse("c.toml", good, &f, &err);
	if (rc)
		return;
	unsetenv("OPENSANDBOX_DOMAIN");
	unsetenv("OPENSANDBOX_API_KEY");
	unsetenv("OPEN_SANDBOX_API_KEY");
	unsetenv("OPEN_SANDBOX_PROTOCOL");
	unsetenv("OPEN_SANDBOX_REQUEST_TIMEOUT");
	setenv("OPEN_SANDBOX_DOMAIN", "env:1", 1);
	setenv("OPEN_SANDBOX_USE_SERVER_PROXY", "off", 1);
	struct osb_config cfg = { .protocol = "http" };
	osb_config_layer(&cfg, &f);
	CHECK(strcmp(cfg.domain, "env:1") == 0, "env over file");
	CHECK(strcmp(cfg.protocol, "http") == 0, "flag over file");
	CHECK(strcmp(cfg.api_key, f.api_key) == 0, "file when nothing else");
	CHECK(cfg.request_timeout_ms == 45000, "timeout from the file");
	CHECK(!cfg.use_server_proxy, "env false over file true");
	unsetenv("OPEN_SANDBOX_USE_SERVER_PROXY");
	struct osb_config cfg2 = { 0 };
	osb_config_layer(&cfg2, &f);
	CHECK(cfg2.use_server_proxy, "file true");
	osb_cfgfile_release(&f);
}

int main(void)
{
	test_good();
	test_bad();
	test_duration();
	test_set();
	test_layers();
	if (failures)
		fprintf(stderr, "%d failures\n", failures);
	return failures ? 1 : 0;
}
