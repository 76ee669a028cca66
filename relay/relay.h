/* The passthrough relay's core (relay.c), apart from its Python binding (module.c). */
#ifndef PYNGRESS_RELAY_H
#define PYNGRESS_RELAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/types.h>

struct relay;

/* Read by the proxy for its status file. */
struct relay_counters {
    uint64_t active;             /* pairs open now */
    uint64_t opened;             /* pairs handed over since the start */
    uint64_t idle_closed;        /* closed by relay_sweep */
    uint64_t failed;             /* closed on an error of either socket (a reset, a refused send) */
    uint64_t bytes_to_upstream;  /* from clients */
    uint64_t bytes_to_client;    /* from upstreams */
};

struct relay *relay_new(int epfd);
const struct relay_counters *relay_counters(const struct relay *r);
int relay_add(struct relay *r, int client_fd, bool client_on_set, int upstream_fd, bool upstream_on_set,
              uint32_t upstream_missed, const unsigned char *first, size_t first_len);
int relay_poll(struct relay *r, double timeout, struct epoll_event *events, int max, struct epoll_event *out);
size_t relay_sweep(struct relay *r, unsigned max_quiet);
size_t relay_close_all(struct relay *r);
void relay_free(struct relay *r);
/* Accept a connection from `listener` (non-blocking, close-on-exec, without its peer's address) and read what it has
 * sent already into the relay's buffer: returns its descriptor, or -1 with errno (EAGAIN: none waiting). `*read_len`
 * is then the bytes read (at `*data`), 0 for an EOF or an error of the read, -1 when nothing has arrived yet. */
int relay_accept_read(struct relay *r, int listener, const unsigned char **data, ssize_t *read_len);
size_t relay_read_size(void);

#endif
