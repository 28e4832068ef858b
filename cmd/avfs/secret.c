// Takes the approver secret out of the process's environment before the
// Go runtime reads it (see secret.go): the value is copied to memory of
// our own and blanked in place, in the block the kernel shows as
// /proc/PID/environ, so the variable stays (empty) and the secret is
// only in avfs's memory.
#include <stdlib.h>
#include <string.h>

static char *secret;

const char *avfs_approver_secret(void) { return secret; }

__attribute__((constructor)) static void avfs_take_secret(int argc, char **argv, char **envp) {
	(void)argc;
	(void)argv;
	static const char key[] = "AVFS_APPROVER_KEY=";
	for (char **e = envp; e && *e; e++) {
		if (strncmp(*e, key, sizeof key - 1) != 0) continue;
		char *v = *e + sizeof key - 1;
		if (secret == NULL && *v) secret = strdup(v);
		memset(v, 0, strlen(v));
	}
}
