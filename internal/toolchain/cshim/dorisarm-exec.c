/*
 * dorisarm's exec shim for cross builds on machines without binfmt_misc.
 * Written for dorisarm; loaded with LD_PRELOAD into the host programs of a
 * build step (shells, make, cmake, ninja, python). When one of them starts a
 * program built for the target (a configure probe, a code generator, a
 * test), the shim starts it under the emulator instead:
 *
 *     $DORISARM_EXEC_EMULATOR -U LD_PRELOAD -0 argv0 path args...
 *
 * Every other exec goes through unchanged, so the build runs at native
 * speed. DORISARM_EXEC_MACHINE is the target's ELF e_machine; the emulator
 * command is an absolute path followed by its arguments, space-separated.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_EMU_ARGS 16

static int is_foreign(const char *path) {
	const char *want = getenv("DORISARM_EXEC_MACHINE");
	if (path == NULL || want == NULL) return 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) return 0;
	unsigned char h[20];
	ssize_t n = read(fd, h, sizeof h);
	close(fd);
	if (n < (ssize_t)sizeof h || memcmp(h, "\177ELF", 4) != 0 || h[5] != 1 /* little-endian */) return 0;
	return (h[18] | (h[19] << 8)) == atoi(want);
}

/* emulated builds the emulator's argv for path; NULL when there is none. */
static char **emulated(const char *path, char *const argv[]) {
	const char *emu = getenv("DORISARM_EXEC_EMULATOR");
	if (emu == NULL || *emu == '\0') return NULL;
	char *copy = strdup(emu);
	if (copy == NULL) return NULL;
	size_t argc = 0;
	while (argv != NULL && argv[argc] != NULL) argc++;
	char **out = calloc(MAX_EMU_ARGS + argc + 6, sizeof *out);
	if (out == NULL) return NULL;
	size_t i = 0;
	for (char *save = NULL, *tok = strtok_r(copy, " ", &save); tok != NULL && i < MAX_EMU_ARGS; tok = strtok_r(NULL, " ", &save))
		out[i++] = tok;
	out[i++] = "-U";
	out[i++] = "LD_PRELOAD";
	if (argc > 0) {
		out[i++] = "-0";
		out[i++] = argv[0];
	}
	out[i++] = (char *)path;
	for (size_t a = 1; a < argc; a++) out[i++] = argv[a];
	out[i] = NULL;
	return out;
}

/* search finds file on PATH the way execvp does (first executable match). */
static const char *search(const char *file, char *buf, size_t len) {
	if (strchr(file, '/') != NULL) return file;
	const char *path = getenv("PATH");
	if (path == NULL) path = "/bin:/usr/bin";
	while (*path) {
		const char *end = strchr(path, ':');
		size_t dl = end ? (size_t)(end - path) : strlen(path);
		if (dl + strlen(file) + 2 <= len) {
			memcpy(buf, dl ? path : ".", dl ? dl : 1);
			size_t at = dl ? dl : 1;
			buf[at] = '/';
			strcpy(buf + at + 1, file);
			if (access(buf, X_OK) == 0) return buf;
		}
		if (!end) break;
		path = end + 1;
	}
	return NULL;
}

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*spawn_fn)(pid_t *, const char *, const posix_spawn_file_actions_t *, const posix_spawnattr_t *, char *const[], char *const[]);

static int real_execve(const char *p, char *const a[], char *const e[]) {
	static execve_fn fn;
	if (!fn) fn = (execve_fn)dlsym(RTLD_NEXT, "execve");
	return fn(p, a, e);
}

int execve(const char *path, char *const argv[], char *const envp[]) {
	if (is_foreign(path)) {
		char **em = emulated(path, argv);
		if (em != NULL) return real_execve(em[0], em, envp);
	}
	return real_execve(path, argv, envp);
}

int execv(const char *path, char *const argv[]) { return execve(path, argv, environ); }

int execvpe(const char *file, char *const argv[], char *const envp[]) {
	char buf[4096];
	const char *p = search(file, buf, sizeof buf);
	if (p != NULL && is_foreign(p)) {
		char **em = emulated(p, argv);
		if (em != NULL) return real_execve(em[0], em, envp);
	}
	typedef int (*fn_t)(const char *, char *const[], char *const[]);
	static fn_t fn;
	if (!fn) fn = (fn_t)dlsym(RTLD_NEXT, "execvpe");
	return fn(file, argv, envp);
}

int execvp(const char *file, char *const argv[]) { return execvpe(file, argv, environ); }

static char **collect(const char *arg0, va_list ap, char ***envp) {
	size_t n = 1, cap = 16;
	char **argv = malloc(cap * sizeof *argv);
	if (argv == NULL) return NULL;
	argv[0] = (char *)arg0;
	for (char *a; (a = va_arg(ap, char *)) != NULL;) {
		if (n + 2 > cap) {
			char **grown = realloc(argv, (cap *= 2) * sizeof *argv);
			if (grown == NULL) return NULL;
			argv = grown;
		}
		argv[n++] = a;
	}
	argv[n] = NULL;
	if (envp) *envp = va_arg(ap, char **);
	return argv;
}

int execl(const char *path, const char *arg0, ...) {
	va_list ap;
	va_start(ap, arg0);
	char **argv = collect(arg0, ap, NULL);
	va_end(ap);
	if (argv == NULL) { errno = ENOMEM; return -1; }
	return execve(path, argv, environ);
}

int execle(const char *path, const char *arg0, ...) {
	va_list ap;
	char **envp;
	va_start(ap, arg0);
	char **argv = collect(arg0, ap, &envp);
	va_end(ap);
	if (argv == NULL) { errno = ENOMEM; return -1; }
	return execve(path, argv, envp);
}

int execlp(const char *file, const char *arg0, ...) {
	va_list ap;
	va_start(ap, arg0);
	char **argv = collect(arg0, ap, NULL);
	va_end(ap);
	if (argv == NULL) { errno = ENOMEM; return -1; }
	return execvpe(file, argv, environ);
}

static int spawn(const char *sym, pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                 const posix_spawnattr_t *at, char *const argv[], char *const envp[], int use_path) {
	char buf[4096];
	const char *p = use_path ? search(file, buf, sizeof buf) : file;
	if (p != NULL && is_foreign(p)) {
		char **em = emulated(p, argv);
		if (em != NULL) {
			static spawn_fn real;
			if (!real) real = (spawn_fn)dlsym(RTLD_NEXT, "posix_spawn");
			return real(pid, em[0], fa, at, em, envp);
		}
	}
	spawn_fn fn = (spawn_fn)dlsym(RTLD_NEXT, sym);
	return fn(pid, file, fa, at, argv, envp);
}

int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa, const posix_spawnattr_t *at,
                char *const argv[], char *const envp[]) {
	return spawn("posix_spawn", pid, path, fa, at, argv, envp, 0);
}

int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa, const posix_spawnattr_t *at,
                 char *const argv[], char *const envp[]) {
	return spawn("posix_spawnp", pid, file, fa, at, argv, envp, 1);
}
