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
 * A script whose "#!" interpreter is a target program runs under the
 * emulator too (never on the build machine by a shell's fallback).
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

#include <stdio.h>

/* The target's machine and the emulator command, read when the shim is
 * loaded: a program that clears its environment before it execs (env -i)
 * still gets the target program emulated. */
static char *shim_machine, *shim_emulator;

__attribute__((constructor)) static void shim_init(void) {
	const char *m = getenv("DORISARM_EXEC_MACHINE"), *e = getenv("DORISARM_EXEC_EMULATOR");
	if (m != NULL) shim_machine = strdup(m);
	if (e != NULL) shim_emulator = strdup(e);
}

static int is_foreign(const char *path) {
	if (path == NULL || shim_machine == NULL) return 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) return 0;
	unsigned char h[20];
	ssize_t n = read(fd, h, sizeof h);
	close(fd);
	if (n < (ssize_t)sizeof h || memcmp(h, "\177ELF", 4) != 0 || h[5] != 1 /* little-endian */) return 0;
	return (h[18] | (h[19] << 8)) == atoi(shim_machine);
}

/* emulated builds the emulator's argv for path; NULL when there is none.
 * The emulator command may have any number of words. */
static char **emulated(const char *path, char *const argv[]) {
	if (shim_emulator == NULL || *shim_emulator == '\0') return NULL;
	char *copy = strdup(shim_emulator);
	if (copy == NULL) return NULL;
	size_t words = 1;
	for (const char *c = shim_emulator; *c; c++)
		if (*c == ' ') words++;
	size_t argc = 0;
	while (argv != NULL && argv[argc] != NULL) argc++;
	char **out = calloc(words + argc + 6, sizeof *out);
	if (out == NULL) return NULL;
	size_t i = 0;
	for (char *save = NULL, *tok = strtok_r(copy, " ", &save); tok != NULL; tok = strtok_r(NULL, " ", &save))
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

/* interpreter reads a "#!" line of path: the interpreter into interp and
 * its one optional argument into arg ("" when none), as the kernel does.
 * It returns 0 when path is no such script. */
static int interpreter(const char *path, char *interp, size_t ilen, char *arg, size_t alen) {
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) return 0;
	char line[256];
	ssize_t n = read(fd, line, sizeof line - 1);
	close(fd);
	if (n < 3 || line[0] != '#' || line[1] != '!') return 0;
	line[n] = '\0';
	char *nl = strchr(line, '\n');
	if (nl != NULL) *nl = '\0';
	char *p = line + 2;
	while (*p == ' ' || *p == '\t') p++;
	char *end = p;
	while (*end && *end != ' ' && *end != '\t') end++;
	if (end == p || (size_t)(end - p) >= ilen) return 0;
	memcpy(interp, p, end - p);
	interp[end - p] = '\0';
	while (*end == ' ' || *end == '\t') end++;
	size_t al = strlen(end);
	while (al > 0 && (end[al - 1] == ' ' || end[al - 1] == '\t' || end[al - 1] == '\r')) al--;
	if (al >= alen) al = alen - 1;
	memcpy(arg, end, al);
	arg[al] = '\0';
	return 1;
}

/* target decides how path runs: the emulator's argv when path is a target
 * program, or a script whose interpreter is one (followed through up to
 * four "#!" levels, as the kernel does); NULL to exec it as it is. *fail is
 * set when it is a target program that cannot be emulated: the caller then
 * fails the exec instead of letting a shell run the file itself. */
static char **target(const char *path, char *const argv[], int depth, int *fail) {
	if (is_foreign(path)) {
		char **em = emulated(path, argv);
		if (em == NULL) *fail = 1;
		return em;
	}
	char interp[256], arg[256];
	if (depth >= 4 || shim_machine == NULL || !interpreter(path, interp, sizeof interp, arg, sizeof arg)) return NULL;
	size_t argc = 0;
	while (argv != NULL && argv[argc] != NULL) argc++;
	/* The kernel's argv for a script: interp [arg] path argv[1..]. */
	char **sargv = calloc(argc + 4, sizeof *sargv);
	if (sargv == NULL) return NULL;
	size_t i = 0;
	sargv[i++] = strdup(interp);
	if (arg[0] != '\0') sargv[i++] = strdup(arg);
	sargv[i++] = (char *)path;
	for (size_t a = 1; a < argc; a++) sargv[i++] = argv[a];
	sargv[i] = NULL;
	char **em = target(sargv[0], sargv, depth + 1, fail);
	if (em == NULL && *fail) {
		fprintf(stderr, "dorisarm exec shim: %s: its interpreter %s is a program for the target, and no emulator is set; not running it on the build machine\n", path, interp);
	}
	return em;
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
	int fail = 0;
	char **em = target(path, argv, 0, &fail);
	if (em != NULL) return real_execve(em[0], em, envp);
	if (fail) { errno = EPERM; return -1; }
	return real_execve(path, argv, envp);
}

int execv(const char *path, char *const argv[]) { return execve(path, argv, environ); }

int execvpe(const char *file, char *const argv[], char *const envp[]) {
	char buf[4096];
	const char *p = search(file, buf, sizeof buf);
	int fail = 0;
	char **em = p != NULL ? target(p, argv, 0, &fail) : NULL;
	if (em != NULL) return real_execve(em[0], em, envp);
	if (fail) { errno = EPERM; return -1; }
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
	int fail = 0;
	char **em = p != NULL ? target(p, argv, 0, &fail) : NULL;
	if (em != NULL) {
		static spawn_fn real;
		if (!real) real = (spawn_fn)dlsym(RTLD_NEXT, "posix_spawn");
		return real(pid, em[0], fa, at, em, envp);
	}
	if (fail) return EPERM;
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
