// linkem: an impaired cable between a namespace host and its bridge, for tests/scripts/test_multihost.sh.
// Hand-written because the maintained tool for this, `tc qdisc ... netem`, is missing from the test machine's
// kernel (CONFIG_NET_SCH_NETEM is not set and there are no modules), and no other qdisc delays packets.
//
//   linkem HOST_TAP SWITCH_TAP CONTROL_FILE
//
// Creates two TAP devices and copies every Ethernet frame from one to the other, each way, after a fixed delay
// and with a given loss probability: HOST_TAP goes into the host's namespace (as its eth0), SWITCH_TAP onto the
// bridge. The settings are read from CONTROL_FILE ("DELAY_US LOSS", e.g. "50 0" or "0 0.3") at start and again
// on SIGHUP, so a fault can start in the middle of a job. Frames keep their order (a constant delay is a FIFO);
// a full queue drops, like a switch port. When linkem exits the TAP devices disappear: the cable is pulled.
// Prints "ready" on stdout once both devices exist.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define SLOTS 4096
#define FRAME 2048

struct queue {
  unsigned char data[SLOTS][FRAME];
  int len[SLOTS];
  int64_t due[SLOTS];
  unsigned head, tail;  // head: next to send; tail: next free
};

static volatile sig_atomic_t reload = 0;
static void on_hup(int s) { (void)s; reload = 1; }

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int open_tap(const char* name) {
  int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK);
  if (fd < 0) { perror("linkem: /dev/net/tun"); exit(1); }
  struct ifreq r;
  memset(&r, 0, sizeof r);
  r.ifr_flags = IFF_TAP | IFF_NO_PI;
  snprintf(r.ifr_name, IFNAMSIZ, "%s", name);
  if (ioctl(fd, TUNSETIFF, &r) < 0) { fprintf(stderr, "linkem: TUNSETIFF %s: %s\n", name, strerror(errno)); exit(1); }
  return fd;
}

static void read_control(const char* path, int64_t* delay_ns, double* loss) {
  FILE* f = fopen(path, "r");
  double d = 0, l = 0;
  if (!f || fscanf(f, "%lf %lf", &d, &l) != 2 || d < 0 || l < 0 || l > 1) {
    fprintf(stderr, "linkem: %s must hold \"DELAY_US LOSS\" (kept the old settings)\n", path);
  } else {
    *delay_ns = (int64_t)(d * 1000);
    *loss = l;
  }
  if (f) fclose(f);
}

// Moves every frame waiting on `from` into q (or drops it), stamped with its departure time.
static void take(int from, struct queue* q, int64_t delay_ns, double loss) {
  for (;;) {
    unsigned slot = q->tail % SLOTS;
    int n = (int)read(from, q->data[slot], FRAME);
    if (n <= 0) return;
    if (loss > 0 && drand48() < loss) continue;
    if (q->tail - q->head >= SLOTS) continue;  // queue full: tail drop
    q->len[slot] = n;
    q->due[slot] = now_ns() + delay_ns;
    q->tail++;
  }
}

static void send_due(int to, struct queue* q, int64_t t) {
  while (q->head != q->tail && q->due[q->head % SLOTS] <= t) {
    unsigned slot = q->head % SLOTS;
    if (write(to, q->data[slot], q->len[slot]) < 0 && errno == EAGAIN) return;  // retried on the next wake
    q->head++;
  }
}

int main(int argc, char** argv) {
  if (argc != 4) { fprintf(stderr, "usage: linkem HOST_TAP SWITCH_TAP CONTROL_FILE\n"); return 2; }
  int64_t delay_ns = 0;
  double loss = 0;
  read_control(argv[3], &delay_ns, &loss);
  int fd[2] = {open_tap(argv[1]), open_tap(argv[2])};
  static struct queue q[2];  // q[i]: frames read from fd[i], to go out on fd[1 - i]
  prctl(PR_SET_TIMERSLACK, 1UL);  // wake on time: the default 50 us slack is as large as the smallest delay
  srand48((long)getpid());
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_hup;
  sigaction(SIGHUP, &sa, NULL);
  printf("ready\n");
  fflush(stdout);
  for (;;) {
    if (reload) { reload = 0; read_control(argv[3], &delay_ns, &loss); }
    int64_t t = now_ns(), next = -1;
    for (int i = 0; i < 2; ++i) {
      send_due(fd[1 - i], &q[i], t);
      if (q[i].head != q[i].tail) {
        int64_t d = q[i].due[q[i].head % SLOTS];
        if (next < 0 || d < next) next = d;
      }
    }
    struct pollfd p[2] = {{fd[0], POLLIN, 0}, {fd[1], POLLIN, 0}};
    struct timespec to, *top = NULL;
    if (next >= 0) {
      int64_t w = next - now_ns();
      if (w < 0) w = 0;
      to.tv_sec = w / 1000000000LL;
      to.tv_nsec = w % 1000000000LL;
      top = &to;
    }
    int r = ppoll(p, 2, top, NULL);
    if (r < 0 && errno != EINTR) { perror("linkem: ppoll"); return 1; }
    for (int i = 0; i < 2; ++i)
      if (r > 0 && (p[i].revents & POLLIN)) take(fd[i], &q[i], delay_ns, loss);
  }
}
