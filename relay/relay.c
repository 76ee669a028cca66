/* The passthrough proxy's relay: copies both ways between the two sockets of each established pair, in C.
 *
 * The proxy (services/proxy/) accepts, reads the ClientHello, routes and connects in Python, then hands each
 * passed-through pair here (relay_add). Every byte after that is moved by this file, so the interpreter runs no
 * code per read or send.
 *
 * The relay shares the proxy's epoll set, and waits on it for the proxy's loop (relay_poll): events of the pairs it
 * holds are handled here, in C, and only the others go back to Python. So a turn of the loop is one epoll_wait,
 * whatever it carries, and a pair costs no epoll_ctl beyond the registrations the old Python copy made (two). A
 * relay of its own, on its own set, measured no better than the Python copy: a nested set (its descriptor on the
 * proxy's set) costs a second epoll_wait per turn and a second wake-up per event in the kernel; a thread of its
 * own, a second thread to wake (BENCHMARKS.md, TLS passthrough).
 *
 * Events are told apart by descriptor (epoll_event.data.fd, as Python's select.epoll registers them): `by_fd`
 * holds the relay's sides. Everything runs on the proxy's connection thread; other threads read the counters only.
 *
 * Per pair, as the Python splicer it replaces: both sockets edge-triggered (EPOLLIN | EPOLLRDHUP), EPOLLOUT added
 * once a send falls short. What one side reads goes straight to the other; what the other cannot take at once
 * waits in that side's `pending`, and the reading side is not read again until it has drained, so a direction
 * holds at most one read (RELAY_READ_SIZE) and a slow reader never makes the proxy buffer without bound.
 * Half-close: an EOF from one side becomes shutdown(SHUT_WR) on the other, and the other direction keeps flowing;
 * the pair is closed once both have ended and nothing is left to write, or at once when either fails.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "relay.h"

/* One read at most this big, shared by every pair (the loop is single-threaded). */
#define RELAY_READ_SIZE (256 * 1024)
/* Reads of a full buffer in a row before the side yields to the other pairs (then it runs again in the same
 * turn's ready list, or the next). */
#define READS_PER_TURN 4
#define READ_EVENTS (EPOLLIN | EPOLLRDHUP | EPOLLET)

struct pair;

struct side {
    int fd;
    bool eof;          /* this socket sent its EOF (read returned 0) */
    bool peer_closed;  /* epoll said its far end closed: a short read is followed by one more, for the EOF */
    bool watches_out;  /* EPOLLOUT is in its registration */
    bool ready;        /* in the relay's ready list */
    unsigned char *pending; /* read from the other side, not yet taken by this socket */
    size_t pending_len, pending_off;
    struct pair *pair;
    struct side *peer;
};

struct pair {
    struct side client, upstream;
    struct pair *prev, *next; /* the relay's open pairs */
    unsigned quiet_sweeps;    /* idle sweeps since data last came either way */
    bool closed;
};

struct relay {
    int epfd;                     /* the proxy's epoll set */
    struct relay_counters counters;
    struct pair *open;            /* doubly linked */
    struct pair *dead;            /* closed in this call: freed at its end (events of the batch may name them) */
    struct side **ready;          /* sides with more to read than one turn allows */
    size_t ready_len, ready_cap;
    struct side **by_fd;          /* descriptor -> the relay's side on it, NULL for the proxy's own */
    size_t by_fd_len;
    int *closing;                 /* descriptors of closed pairs, closed for good by finish_closes() */
    size_t closing_len, closing_cap;
    unsigned char buffer[RELAY_READ_SIZE];
};

/* What by_fd holds for a descriptor whose pair is closed but which is not closed yet: its events are dropped. */
static struct side closed_marker;

/* Close a pair's descriptors for good. Not at once: the events of the batch being handled may name them, and the
 * proxy's own batch too when relay_add fails, so a new connection could take the number and get a stale event (a
 * hang-up that would close it). Each is closed at the end of the batch, or at the start of the next wait. */
static void finish_closes(struct relay *r) {
    for (size_t i = 0; i < r->closing_len; i++) {
        int fd = r->closing[i];
        close(fd); /* takes it off the epoll set; the number may be the proxy's again from here */
        if ((size_t)fd < r->by_fd_len)
            r->by_fd[fd] = NULL;
    }
    r->closing_len = 0;
}

static void close_later(struct relay *r, int fd) {
    if (r->closing_len == r->closing_cap) {
        size_t cap = r->closing_cap ? r->closing_cap * 2 : 64;
        int *grown = realloc(r->closing, cap * sizeof *grown);
        if (!grown) { /* out of memory: at once, and its events are the proxy's to ignore */
            if ((size_t)fd < r->by_fd_len)
                r->by_fd[fd] = NULL;
            close(fd);
            return;
        }
        r->closing = grown;
        r->closing_cap = cap;
    }
    if ((size_t)fd < r->by_fd_len)
        r->by_fd[fd] = &closed_marker;
    r->closing[r->closing_len++] = fd;
}

static void close_pair(struct relay *r, struct pair *p, bool failed) {
    if (p->closed)
        return;
    p->closed = true;
    close_later(r, p->client.fd);
    close_later(r, p->upstream.fd);
    p->client.fd = p->upstream.fd = -1;
    if (p->prev)
        p->prev->next = p->next;
    else
        r->open = p->next;
    if (p->next)
        p->next->prev = p->prev;
    p->next = r->dead;
    r->dead = p;
    r->counters.active--;
    if (failed)
        r->counters.failed++;
}

/* Free the pairs closed since the last call; drop their sides from the ready list first. */
static void reap(struct relay *r) {
    if (!r->dead)
        return;
    size_t kept = 0;
    for (size_t i = 0; i < r->ready_len; i++)
        if (!r->ready[i]->pair->closed)
            r->ready[kept++] = r->ready[i];
    r->ready_len = kept;
    while (r->dead) {
        struct pair *p = r->dead;
        r->dead = p->next;
        free(p->client.pending);
        free(p->upstream.pending);
        free(p);
    }
}

static bool mark_ready(struct relay *r, struct side *s) {
    if (s->ready)
        return true;
    if (r->ready_len == r->ready_cap) {
        size_t cap = r->ready_cap ? r->ready_cap * 2 : 64;
        struct side **grown = realloc(r->ready, cap * sizeof *grown);
        if (!grown)
            return false;
        r->ready = grown;
        r->ready_cap = cap;
    }
    s->ready = true;
    r->ready[r->ready_len++] = s;
    return true;
}

static bool watch_out(struct relay *r, struct side *s) {
    if (s->watches_out)
        return true;
    struct epoll_event ev = {.events = READ_EVENTS | EPOLLOUT, .data.u64 = 0};
    ev.data.fd = s->fd;
    if (epoll_ctl(r->epfd, EPOLL_CTL_MOD, s->fd, &ev) < 0)
        return false;
    s->watches_out = true;
    return true;
}

/* Send to `s` what its peer read; keep what the socket did not take. False when the pair was closed. */
static bool send_to(struct relay *r, struct side *s, const unsigned char *data, size_t len) {
    size_t sent = 0;
    for (;;) {
        ssize_t n = send(s->fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n >= 0) {
            sent = (size_t)n; /* short: the socket's buffer is full, and another send now would find it so */
            break;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            break;
        close_pair(r, s->pair, true);
        return false;
    }
    if (sent == len)
        return true;
    size_t rest = len - sent;
    s->pending = malloc(rest);
    if (!s->pending || !watch_out(r, s)) {
        close_pair(r, s->pair, true);
        return false;
    }
    memcpy(s->pending, data + sent, rest);
    s->pending_len = rest;
    s->pending_off = 0;
    return true;
}

static void got_eof(struct relay *r, struct side *s) {
    s->eof = true;
    struct side *peer = s->peer;
    if (peer->eof) {
        if (!s->pending)
            close_pair(r, s->pair, false);
        return; /* else flush() closes the pair once the rest is out */
    }
    if (shutdown(peer->fd, SHUT_WR) < 0)
        close_pair(r, s->pair, true);
}

/* Read `s` and send to its peer, until it has nothing more, its peer is full, or its turn is over. */
static void pump(struct relay *r, struct side *s) {
    struct side *peer = s->peer;
    uint64_t *counted = s == &s->pair->client ? &r->counters.bytes_to_upstream : &r->counters.bytes_to_client;
    int reads = 0;
    while (!peer->pending && !s->eof) {
        ssize_t n = recv(s->fd, r->buffer, RELAY_READ_SIZE, MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                close_pair(r, s->pair, true);
            return;
        }
        s->pair->quiet_sweeps = 0;
        if (n == 0) {
            got_eof(r, s);
            return;
        }
        *counted += (uint64_t)n;
        if (!send_to(r, peer, r->buffer, (size_t)n))
            return;
        if (n == RELAY_READ_SIZE) {
            if (++reads == READS_PER_TURN) {
                if (!mark_ready(r, s))
                    close_pair(r, s->pair, true);
                return; /* more may be waiting: after the other pairs' turn */
            }
            continue;
        }
        if (!s->peer_closed)
            return; /* a short read took all there was; the next arrival is a new edge */
        /* else the EOF came with this data, and no edge will report it again: read it now */
    }
}

/* `s` can take more: send its pending bytes, then read its peer again (held back while `s` was full). */
static void flush(struct relay *r, struct side *s) {
    unsigned char *data = s->pending;
    size_t off = s->pending_off, len = s->pending_len;
    s->pending = NULL;
    bool open = send_to(r, s, data + off, len - off);
    free(data);
    if (!open || s->pending)
        return;
    if (s->eof && s->peer->eof) {
        close_pair(r, s->pair, false); /* the last bytes are out */
        return;
    }
    pump(r, s->peer);
}

static void on_event(struct relay *r, struct side *s, uint32_t events) {
    if (s->pending && (events & EPOLLOUT)) {
        flush(r, s);
        if (s->pair->closed)
            return;
    }
    if (!(events & EPOLLIN)) {
        if (events & (EPOLLERR | EPOLLHUP))
            close_pair(r, s->pair, true);
        return;
    }
    if (events & (EPOLLRDHUP | EPOLLHUP))
        s->peer_closed = true;
    pump(r, s);
}

struct relay *relay_new(int epfd) {
    struct relay *r = calloc(1, sizeof *r);
    if (r)
        r->epfd = epfd;
    return r;
}

const struct relay_counters *relay_counters(const struct relay *r) { return &r->counters; }

static bool own(struct relay *r, struct side *s) {
    size_t fd = (size_t)s->fd;
    if (fd >= r->by_fd_len) {
        size_t len = r->by_fd_len ? r->by_fd_len : 1024;
        while (len <= fd)
            len *= 2;
        struct side **grown = realloc(r->by_fd, len * sizeof *grown);
        if (!grown)
            return false;
        memset(grown + r->by_fd_len, 0, (len - r->by_fd_len) * sizeof *grown);
        r->by_fd = grown;
        r->by_fd_len = len;
    }
    r->by_fd[fd] = s;
    return true;
}

/* Put `s` on the set for the relay: added when it is not on it yet, else changed (which reports what is waiting,
 * as adding does). */
static bool watch(struct relay *r, struct side *s, bool on_set) {
    struct epoll_event ev = {.events = READ_EVENTS | (s->pending ? EPOLLOUT : 0), .data.u64 = 0};
    ev.data.fd = s->fd;
    s->watches_out = s->pending != NULL;
    return epoll_ctl(r->epfd, on_set ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, s->fd, &ev) == 0;
}

/* Take over two connected, non-blocking sockets and relay between them, sending `first` (the bytes read from the
 * client so far) upstream first. The relay owns both descriptors from here, and closes them. Returns 0, or -1
 * with errno when the pair could not be taken (both are closed then).
 *
 * Each socket is on the set already or not (`*_on_set`). The upstream, when on it, must be registered as its
 * connect left it: edge-triggered for EPOLLIN | EPOLLRDHUP | EPOLLOUT, its events since the last read in
 * `upstream_missed` (the edges epoll will not report again), so that it needs no epoll_ctl. The client, when on
 * it, is registered again (which reports what waits). */
int relay_add(struct relay *r, int client_fd, bool client_on_set, int upstream_fd, bool upstream_on_set,
              uint32_t upstream_missed, const unsigned char *first, size_t first_len) {
    struct pair *p = calloc(1, sizeof *p);
    if (!p) {
        close(client_fd);
        close(upstream_fd);
        errno = ENOMEM;
        return -1;
    }
    p->client = (struct side){.fd = client_fd, .pair = p, .peer = &p->upstream};
    p->upstream = (struct side){.fd = upstream_fd, .pair = p, .peer = &p->client};
    p->next = r->open;
    if (r->open)
        r->open->prev = p;
    r->open = p;
    r->counters.active++;
    r->counters.opened++;
    r->counters.bytes_to_upstream += first_len;
    int result = 0;
    if (!own(r, &p->client) || !own(r, &p->upstream)) {
        close_pair(r, p, true);
        errno = ENOMEM;
        result = -1;
    } else if (first_len && !send_to(r, &p->upstream, first, first_len)) {
        /* counted as failed: the upstream is gone already */
    } else if (!watch(r, &p->client, client_on_set)) {
        int saved = errno;
        close_pair(r, p, true);
        errno = saved;
        result = -1;
    } else if (upstream_on_set) {
        p->upstream.watches_out = true;
        if (upstream_missed)
            on_event(r, &p->upstream, upstream_missed);
    } else if (!watch(r, &p->upstream, false)) {
        int saved = errno;
        close_pair(r, p, true);
        errno = saved;
        result = -1;
    }
    int saved = errno;
    reap(r);
    errno = saved;
    return result;
}

/* Wait on the set for at most `timeout` seconds (negative: without end; no wait while sides are ready), handle
 * the relay's events, then the sides left ready by earlier turns. The proxy's events go to `out` (at most `max`);
 * returns how many, or -1 with errno when epoll_wait failed (EINTR: 0). */
static double monotonic_seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

/* Milliseconds for epoll_wait from seconds, never early: a timer due in 0.4 ms waits 1 ms, not 0. */
static int wait_ms(double seconds) {
    if (seconds <= 0)
        return 0;
    double ms = seconds * 1000.0;
    int whole = ms >= INT_MAX ? INT_MAX : (int)ms;
    return whole < ms && whole < INT_MAX ? whole + 1 : whole;
}

int relay_poll(struct relay *r, double timeout, struct epoll_event *events, int max, struct epoll_event *out) {
    /* Turns that carry only the pairs' events are handled here, without going back to the proxy's loop (which would
     * take the GIL, run a turn of Python and call again): it returns once it has events of its own, or the timeout
     * has passed. */
    double deadline = timeout >= 0 ? monotonic_seconds() + timeout : 0;
    int ms = timeout >= 0 ? wait_ms(timeout) : -1;
    for (;;) {
        if (r->ready_len)
            ms = 0;
        finish_closes(r); /* of relay_add, during the proxy's batch */
        int n = epoll_wait(r->epfd, events, max, ms);
        if (n < 0)
            return errno == EINTR ? 0 : -1;
        int theirs = 0;
        for (int i = 0; i < n; i++) {
            size_t fd = (size_t)(unsigned)events[i].data.fd;
            struct side *s = fd < r->by_fd_len ? r->by_fd[fd] : NULL;
            if (s == NULL)
                out[theirs++] = events[i];
            else if (s != &closed_marker && !s->pair->closed)
                on_event(r, s, events[i].events);
        }
        /* The ready sides of earlier turns; what these add waits for the next turn. */
        size_t count = r->ready_len;
        for (size_t i = 0; i < count; i++) {
            struct side *s = r->ready[i];
            s->ready = false;
            if (!s->pair->closed)
                pump(r, s);
        }
        if (count) { /* r->ready is NULL until a side is first ready: memmove must not be given it (C11 7.24.1) */
            memmove(r->ready, r->ready + count, (r->ready_len - count) * sizeof *r->ready);
            r->ready_len -= count;
        }
        reap(r);
        finish_closes(r);
        if (theirs || (n == 0 && count == 0))
            return theirs; /* events of the proxy's, or the wait timed out */
        if (timeout >= 0) {
            double left = deadline - monotonic_seconds();
            if (left <= 0)
                return 0;
            ms = wait_ms(left);
        }
    }
}

int relay_accept_read(struct relay *r, int listener, const unsigned char **data, ssize_t *read_len) {
    int fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
        return -1;
    /* The ClientHello has usually arrived with the connection: read now, it costs no turn of the loop. */
    ssize_t n = recv(fd, r->buffer, RELAY_READ_SIZE, MSG_DONTWAIT);
    *data = r->buffer;
    *read_len = n >= 0 ? n : errno == EAGAIN || errno == EWOULDBLOCK ? -1 : 0;
    return fd;
}

size_t relay_read_size(void) { return RELAY_READ_SIZE; }

/* One idle sweep: a pair with no data either way for more than `max_quiet` sweeps is closed. Returns how many. */
size_t relay_sweep(struct relay *r, unsigned max_quiet) {
    size_t closed = 0;
    for (struct pair *p = r->open, *next; p; p = next) {
        next = p->next;
        if (++p->quiet_sweeps > max_quiet) {
            close_pair(r, p, false);
            closed++;
        }
    }
    r->counters.idle_closed += closed;
    reap(r);
    finish_closes(r);
    return closed;
}

/* Close every pair (the drain's deadline has passed). Returns how many were open. */
size_t relay_close_all(struct relay *r) {
    size_t closed = 0;
    while (r->open) {
        close_pair(r, r->open, false);
        closed++;
    }
    reap(r);
    finish_closes(r);
    return closed;
}

/* Close every pair and free the relay (the epoll set is the proxy's: left open). */
void relay_free(struct relay *r) {
    if (!r)
        return;
    relay_close_all(r);
    free(r->ready);
    free(r->by_fd);
    free(r->closing);
    free(r);
}
