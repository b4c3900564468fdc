/* The backend step launcher: what ninja runs per backend edge, in front of the Python backend step.

   usage: step-launcher [--servers N] SOCKET STEP_COMMAND...

   It hands the step's arguments to the build directory's step server (gn_thinlto/steps/step_server.py)
   on the Unix socket SOCKET and does what the server answers: exit with a status (a cache hit, or the end
   of a miss), or run a compiler command with this process's standard streams (a miss: the compiler's
   diagnostics reach ninja as they would from the step) and report its exit status back. Every cache
   decision, hash and write is the server's; this program only carries frames. Whenever the server is
   missing, is not this user's, answers something unexpected or goes away, it runs STEP_COMMAND itself (the
   Python step, which starts a server for the next edges): slower, never wrong.

   With --servers N (N > 1) the build directory has N servers: the step goes to server K, a hash of STEP_COMMAND
   modulo N (FNV-1a), whose socket is SOCKET for K = 0 and SOCKET with ".K" before its ".sock" otherwise
   (gn_thinlto/steps/step_args.py, server_socket). The chosen socket is put in GN_THINLTO_STEP_SERVER, so that
   the Python step starts that server when none answered.

   Frames, both ways: a 4-byte little-endian length, then that many bytes. The server's copy of this protocol is
   gn_thinlto/steps/step_protocol.py (tests/unit/test_step_protocol.py checks that the two agree).
     request:  "gn-thinlto-step-v3" NUL CWD NUL COUNT NUL ARG NUL ... ENV NUL ...
               (COUNT in decimal: how many of the step command's arguments follow; then this process's
               environment as NAME=VALUE strings, for a remote launcher the server runs in its own process)
     answers:  'A'                      the request is taken (first, within ACK_TIMEOUT_MS, or: run the step)
               'F'                      run STEP_COMMAND instead
               'X' STATUS NUL MESSAGE   print MESSAGE on stderr, exit STATUS
               'R' ARG NUL ARG NUL ...  run this command, then send its status as a frame of decimal digits; when
                                        the first ARG is COMPILE_MARK, the rest is a compile, run without the
                                        variables UNSET_FOR_COMPILES names

   GN_THINLTO_STEP_ACCOUNTING=FILE appends one line per run, for the benchmarks:
     "launcher WALL_US CHILD_WALL_US USER_US SYS_US" (this process's own CPU, children excluded).
*/
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROTOCOL "gn-thinlto-step-v3"
#define MAX_FRAME (16u << 20)
/* A server that does not take a request this fast is stopped or wedged: the step runs without it (after the
   'A', a step may rightly wait long: on another build's compile of the same job, or on its own compiler). */
#define ACK_TIMEOUT_MS 10000

/* Removed from the environment of the compiles the server has this program run (a RUN command whose first word
   is COMPILE_MARK): thinlto_base/compile_env.py, UNSET, says why. */
#define COMPILE_MARK "gn-thinlto-compile:"
static const char *const UNSET_FOR_COMPILES[] = {
    "CCC_OVERRIDE_OPTIONS", "COMPILER_PATH", "CLANG_NO_DEFAULT_CONFIG", "LD_LIBRARY_PATH", "LD_PRELOAD", "LD_AUDIT",
};

static char **step_command;
static struct timespec started;
static int64_t child_wall_us;

static int64_t since_us(const struct timespec *t0) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (int64_t)(now.tv_sec - t0->tv_sec) * 1000000 + (now.tv_nsec - t0->tv_nsec) / 1000;
}

static void account(void) {
  const char *path = getenv("GN_THINLTO_STEP_ACCOUNTING");
  if (!path || !*path) return;
  struct rusage self;
  getrusage(RUSAGE_SELF, &self);
  char line[160];
  int n = snprintf(line, sizeof line, "launcher %lld %lld %lld %lld\n", (long long)since_us(&started),
                   (long long)child_wall_us,
                   (long long)self.ru_utime.tv_sec * 1000000 + self.ru_utime.tv_usec,
                   (long long)self.ru_stime.tv_sec * 1000000 + self.ru_stime.tv_usec);
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd >= 0) {
    if (write(fd, line, (size_t)n) < 0) { /* accounting is best effort */ }
    close(fd);
  }
}

static void leave(int status) {
  account();
  exit(status);
}

/* Run the Python step instead (never returns). */
static void fall_back(int sock) {
  if (sock >= 0) close(sock);
  account();
  execvp(step_command[0], step_command);
  fprintf(stderr, "gn-thinlto: error: backend: cannot run %s: %s\n", step_command[0], strerror(errno));
  exit(127);
}

static int write_all(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL); /* a server gone away is an error, not SIGPIPE */
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static int read_all(int fd, char *p, size_t n) {
  while (n) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

static int send_frame(int fd, const char *body, size_t n) {
  unsigned char head[4] = {n & 0xff, (n >> 8) & 0xff, (n >> 16) & 0xff, (n >> 24) & 0xff};
  return write_all(fd, (const char *)head, 4) || write_all(fd, body, n) ? -1 : 0;
}

/* The next frame, NUL-terminated (a caller's string view), in a malloc'd buffer; NULL on EOF or error. */
static char *read_frame(int fd, size_t *len) {
  unsigned char head[4];
  if (read_all(fd, (char *)head, 4)) return NULL;
  size_t n = head[0] | head[1] << 8 | head[2] << 16 | (size_t)head[3] << 24;
  if (n == 0 || n > MAX_FRAME) return NULL;
  char *body = malloc(n + 1);
  if (!body) return NULL;
  if (read_all(fd, body, n)) {
    free(body);
    return NULL;
  }
  body[n] = 0;
  *len = n;
  return body;
}

/* Run the NUL-separated command in BODY[0..N); its exit status (128 + signal when killed). */
static int run_command(char *body, size_t n) {
  size_t count = 0;
  for (size_t i = 0; i < n; i++) count += body[i] == 0;
  if (count == 0 || body[n - 1] != 0) return -1;
  char **argv = calloc(count + 1, sizeof *argv);
  if (!argv) return -1;
  for (size_t i = 0, k = 0; i < n; i += strlen(body + i) + 1) argv[k++] = body + i;
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  pid_t pid = fork();
  if (pid == 0) {
    if (strcmp(argv[0], COMPILE_MARK) == 0) {
      for (size_t i = 0; i < sizeof UNSET_FOR_COMPILES / sizeof *UNSET_FOR_COMPILES; i++) unsetenv(UNSET_FOR_COMPILES[i]);
      argv++;
      if (!argv[0]) _exit(127);
    }
    execvp(argv[0], argv);
    fprintf(stderr, "gn-thinlto: error: backend: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  free(argv);
  if (pid < 0) return -1;
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  child_wall_us += since_us(&t0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The socket of the server this step goes to (see --servers above), in CHOSEN; -1 if it does not fit. */
static int choose_socket(const char *sock, long servers, char *chosen, size_t size) {
  uint32_t hash = 2166136261u;
  for (char **a = step_command; *a; a++)
    for (const unsigned char *c = (const unsigned char *)*a;; c++) {
      hash = (hash ^ *c) * 16777619u;
      if (!*c) break;
    }
  long server = servers > 1 ? (long)(hash % (uint32_t)servers) : 0;
  size_t len = strlen(sock);
  if (server == 0) {
    if (len >= size) return -1;
    memcpy(chosen, sock, len + 1);
  } else {
    size_t stem = len >= 5 && strcmp(sock + len - 5, ".sock") == 0 ? len - 5 : len;
    int n = snprintf(chosen, size, "%.*s.%ld.sock", (int)stem, sock, server);
    if (n < 0 || (size_t)n >= size) return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  clock_gettime(CLOCK_MONOTONIC, &started);
  long servers = 1;
  if (argc > 2 && strcmp(argv[1], "--servers") == 0) {
    char *end;
    servers = strtol(argv[2], &end, 10);
    if (*end || servers < 1 || servers > 16) servers = 0;
    argv += 2;
    argc -= 2;
  }
  if (argc < 3 || servers < 1) {
    fprintf(stderr, "usage: step-launcher [--servers N] SOCKET STEP_COMMAND...\n");
    return 2;
  }
  step_command = argv + 2;
  const char *fault = getenv("GN_THINLTO_FAULT");
  if (fault && *fault) fall_back(-1); /* fault injection is for the Python step */

  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  if (choose_socket(argv[1], servers, addr.sun_path, sizeof addr.sun_path)) fall_back(-1);
  /* one server: no choice to pass on, and none inherited from an outer build may stand for it */
  if (servers > 1 ? setenv("GN_THINLTO_STEP_SERVER", addr.sun_path, 1) : unsetenv("GN_THINLTO_STEP_SERVER"))
    fall_back(-1);
  /* non-blocking connect: a server whose backlog is full (stopped, wedged) is not waited for */
  int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (sock < 0 || connect(sock, (struct sockaddr *)&addr, sizeof addr) < 0) fall_back(sock);
  int flags = fcntl(sock, F_GETFL);
  if (flags < 0 || fcntl(sock, F_SETFL, flags & ~O_NONBLOCK) < 0) fall_back(sock);
  struct ucred peer;
  socklen_t peer_len = sizeof peer;
  if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &peer, &peer_len) < 0 || peer.uid != geteuid()) fall_back(sock);

  char cwd[4096];
  if (!getcwd(cwd, sizeof cwd)) fall_back(sock);
  char count[24];
  snprintf(count, sizeof count, "%d", argc - 2);
  size_t size = sizeof PROTOCOL + strlen(cwd) + 1 + strlen(count) + 1;
  for (char **a = step_command; *a; a++) size += strlen(*a) + 1;
  for (char **e = environ; *e; e++) size += strlen(*e) + 1;
  if (size > MAX_FRAME) fall_back(sock);
  char *request = malloc(size), *p = request;
  if (!request) fall_back(sock);
  p = stpcpy(p, PROTOCOL) + 1;
  p = stpcpy(p, cwd) + 1;
  p = stpcpy(p, count) + 1;
  for (char **a = step_command; *a; a++) p = stpcpy(p, *a) + 1;
  for (char **e = environ; *e; e++) p = stpcpy(p, *e) + 1;
  if (send_frame(sock, request, size)) fall_back(sock);
  free(request);
  struct pollfd ready = {.fd = sock, .events = POLLIN};
  int polled;
  while ((polled = poll(&ready, 1, ACK_TIMEOUT_MS)) < 0 && errno == EINTR) {
  }
  size_t ack_len;
  char *ack = polled == 1 ? read_frame(sock, &ack_len) : NULL;
  if (!ack || ack[0] != 'A') fall_back(sock);
  free(ack);

  for (;;) {
    size_t n;
    char *frame = read_frame(sock, &n);
    if (!frame) fall_back(sock); /* the server went away: the step does it all again, correctly */
    if (frame[0] == 'X') {
      char *message = memchr(frame, 0, n);
      if (message && message[1]) fputs(message + 1, stderr);
      leave(atoi(frame + 1));
    } else if (frame[0] == 'R' && n > 1) {
      int status = run_command(frame + 1, n - 1);
      if (status < 0) fall_back(sock);
      char digits[16];
      int len = snprintf(digits, sizeof digits, "%d", status);
      if (send_frame(sock, digits, (size_t)len)) fall_back(sock);
    } else {
      fall_back(sock); /* 'F', or anything this launcher does not know */
    }
    free(frame);
  }
}
