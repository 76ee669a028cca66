#define _GNU_SOURCE /* memmem */
#include "http.h"

#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "text.h"

#define MAX_INT_DIGITS 4300 /* Python's int() refuses longer digit strings */

const char *os_error_text(int errno_value)
{
    /* musl words some of these differently ("Not a socket", "Operation timed out", ...). */
    static const struct {
        int value;
        const char *text;
    } GLIBC[] = {
        {EPERM, "Operation not permitted"},
        {ENOENT, "No such file or directory"},
        {EINTR, "Interrupted system call"},
        {EIO, "Input/output error"},
        {EBADF, "Bad file descriptor"},
        {EAGAIN, "Resource temporarily unavailable"},
        {ENOMEM, "Cannot allocate memory"},
        {EACCES, "Permission denied"},
        {EFAULT, "Bad address"},
        {ENOTDIR, "Not a directory"},
        {EISDIR, "Is a directory"},
        {EINVAL, "Invalid argument"},
        {ENFILE, "Too many open files in system"},
        {EMFILE, "Too many open files"},
        {ENOSPC, "No space left on device"},
        {EPIPE, "Broken pipe"},
        {ENAMETOOLONG, "File name too long"},
        {ELOOP, "Too many levels of symbolic links"},
        {ENOTSOCK, "Socket operation on non-socket"},
        {EPROTOTYPE, "Protocol wrong type for socket"},
        {EOPNOTSUPP, "Operation not supported"},
        {EAFNOSUPPORT, "Address family not supported by protocol"},
        {EADDRINUSE, "Address already in use"},
        {EADDRNOTAVAIL, "Cannot assign requested address"},
        {ENETDOWN, "Network is down"},
        {ECONNABORTED, "Software caused connection abort"},
        {ECONNRESET, "Connection reset by peer"},
        {ENOBUFS, "No buffer space available"},
        {EISCONN, "Transport endpoint is already connected"},
        {ENOTCONN, "Transport endpoint is not connected"},
        {ETIMEDOUT, "Connection timed out"},
        {ECONNREFUSED, "Connection refused"},
        {EALREADY, "Operation already in progress"},
        {EINPROGRESS, "Operation now in progress"},
        {EROFS, "Read-only file system"},
        {ENXIO, "No such device or address"},
        {ENODEV, "No such device"},
    };
    for (size_t i = 0; i < sizeof GLIBC / sizeof GLIBC[0]; i++)
        if (GLIBC[i].value == errno_value)
            return GLIBC[i].text;
    return strerror(errno_value);
}

static bool fail_errno(post_result *r, int errno_value)
{
    r->outcome = POST_OS_ERROR;
    r->errno_value = errno_value;
    return false;
}

static bool fail_message(post_result *r, const char *message)
{
    r->outcome = POST_FAILED;
    buf_puts(&r->message, message);
    return false;
}

/* After wait_ready() returned 0 or -1: socket.timeout says "timed out". */
static bool wait_failed(post_result *r, int ready)
{
    return ready == 0 ? fail_message(r, "timed out") : fail_errno(r, errno);
}

/* ---- the socket, with Python's socket.settimeout() semantics ---- */

static int64_t now_ms(void)
{
    struct timespec t;
    if (clock_gettime(CLOCK_MONOTONIC, &t) != 0)
        return 0; /* no clock: each wait then gets the whole timeout */
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Waits until fd is ready for `events` or the deadline passes: 1 ready, 0 timed out, -1 error (errno). */
static int wait_ready(int fd, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - now_ms();
        if (left < 0)
            return 0;
        struct pollfd p = {fd, events, 0};
        int n = poll(&p, 1, left > INT32_MAX ? INT32_MAX : (int)left);
        if (n >= 0 || errno != EINTR)
            return n > 0 ? 1 : n;
    }
}

/* sockaddr_un for a path in bytes, as CPython builds it: a leading NUL names an abstract socket (no
 * terminator), anything else is a file path that must leave room for its NUL. */
static bool unix_address(const buf *path, struct sockaddr_un *addr, socklen_t *len)
{
    memset(addr, 0, sizeof *addr);
    addr->sun_family = AF_UNIX;
    bool abstract = path->len == 0 || path->data[0] == '\0';
    if (path->len > sizeof addr->sun_path - (abstract ? 0 : 1))
        return false;
    memcpy(addr->sun_path, path->data, path->len);
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + path->len + (abstract ? 0 : 1));
    return true;
}

static bool connect_with_timeout(int fd, const struct sockaddr_un *addr, socklen_t len, int timeout_ms,
                                 post_result *r)
{
    if (connect(fd, (const struct sockaddr *)addr, len) == 0)
        return true;
    /* A Unix socket whose listener's backlog is full answers EAGAIN at once, and Python reports it. */
    if (errno != EINPROGRESS && errno != EINTR)
        return fail_errno(r, errno);
    int ready = wait_ready(fd, POLLOUT, now_ms() + timeout_ms);
    if (ready <= 0)
        return wait_failed(r, ready);
    int error = 0;
    socklen_t size = sizeof error;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) != 0)
        error = errno;
    return error ? fail_errno(r, error) : true;
}

/* sendall(): the whole buffer within one timeout. */
static bool send_all(int fd, const unsigned char *data, size_t len, int timeout_ms, post_result *r)
{
    int64_t deadline = now_ms() + timeout_ms;
    while (len > 0) {
        int ready = wait_ready(fd, POLLOUT, deadline);
        if (ready <= 0)
            return wait_failed(r, ready);
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                continue;
            return fail_errno(r, errno);
        }
        data += n;
        len -= (size_t)n;
    }
    return true;
}

/* recv() until the server closes, each read within the timeout. */
static bool receive_all(int fd, int timeout_ms, size_t max, post_result *r)
{
    unsigned char chunk[65536];
    for (;;) {
        int ready = wait_ready(fd, POLLIN, now_ms() + timeout_ms);
        if (ready <= 0)
            return wait_failed(r, ready);
        ssize_t n = recv(fd, chunk, sizeof chunk, 0);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                continue;
            return fail_errno(r, errno);
        }
        if (n == 0)
            return true;
        if (!buf_append(&r->response, chunk, (size_t)n)) { /* the one limit Python does not have */
            r->outcome = POST_FAILED;
            buf_puts(&r->message, "the response is over ");
            buf_put_size(&r->message, max);
            buf_puts(&r->message, " bytes");
            return false;
        }
    }
}

/* ---- reading the response as the Python plugin does (bytes.partition, split, strip, isdigit, int) ---- */

static void strip(const unsigned char **s, size_t *n)
{
    for (; *n && ascii_space(**s); (*n)--)
        (*s)++;
    while (*n && ascii_space((*s)[*n - 1]))
        (*n)--;
}

/* name.lower() == b"content-length" (ASCII only, like bytes.lower()) */
static bool is_content_length(const unsigned char *name, size_t n)
{
    static const char WANTED[] = "content-length";
    if (n != sizeof WANTED - 1)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 32 : name[i]) != WANTED[i])
            return false;
    return true;
}

static bool all_digits(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return n > 0;
}

/* int(digits), as far as the caller needs it; false, with Python's ValueError message, past its limit. */
static bool py_int(const unsigned char *s, size_t n, size_t *value, post_result *r)
{
    if (n > MAX_INT_DIGITS) {
        r->outcome = POST_FAILED;
        buf_puts(&r->message, "Exceeds the limit (4300 digits) for integer string conversion: value has ");
        buf_put_size(&r->message, n);
        buf_puts(&r->message, " digits; use sys.set_int_max_str_digits() to increase the limit");
        return false;
    }
    *value = 0;
    for (size_t i = 0; i < n; i++) /* saturating: only a comparison with a length follows */
        *value = *value > (SIZE_MAX - 9) / 10 ? SIZE_MAX : *value * 10 + (size_t)(s[i] - '0');
    return true;
}

static const unsigned char *find(const unsigned char *s, size_t n, const char *what)
{
    return memmem(s, n, what, strlen(what));
}

static void not_http(post_result *r, const unsigned char *data, size_t len)
{
    r->outcome = POST_FAILED;
    buf_puts(&r->message, "not an HTTP response: ");
    bytes_repr(&r->message, data, len < 80 ? len : 80);
}

/* Applies every Content-Length header in turn, as the Python plugin's loop does. */
static bool apply_content_lengths(const unsigned char *line, const unsigned char *head_end, post_result *r)
{
    while (line < head_end) {
        const unsigned char *end = find(line, (size_t)(head_end - line), "\r\n");
        end = end ? end : head_end;
        const unsigned char *colon = memchr(line, ':', (size_t)(end - line));
        const unsigned char *name = line, *value = colon ? colon + 1 : end;
        size_t name_len = (size_t)((colon ? colon : end) - line), value_len = (size_t)(end - value);
        strip(&name, &name_len);
        strip(&value, &value_len);
        size_t length;
        if (is_content_length(name, name_len) && all_digits(value, value_len)) {
            if (!py_int(value, value_len, &length, r))
                return false;
            if (length < r->payload_len)
                r->payload_len = length;
        }
        line = end + 2;
    }
    return true;
}

static void parse_response(post_result *r)
{
    const unsigned char *data = r->response.data ? r->response.data : (const unsigned char *)"";
    size_t len = r->response.len;
    const unsigned char *separator = find(data, len, "\r\n\r\n");
    const unsigned char *head_end = separator ? separator : data + len;
    const unsigned char *status_end = find(data, (size_t)(head_end - data), "\r\n");
    status_end = status_end ? status_end : head_end;
    /* status_line.split(b" ", 2): the version, then the code up to the next space */
    const unsigned char *space = memchr(data, ' ', (size_t)(status_end - data));
    const unsigned char *code = space ? space + 1 : NULL;
    const unsigned char *code_end = code ? memchr(code, ' ', (size_t)(status_end - code)) : NULL;
    code_end = code_end ? code_end : status_end;
    size_t code_len = code ? (size_t)(code_end - code) : 0;
    if (!separator || !space || (size_t)(space - data) < 7 || memcmp(data, "HTTP/1.", 7) ||
        !all_digits(code, code_len)) {
        not_http(r, data, len);
        return;
    }
    r->payload = separator + 4;
    r->payload_len = len - (size_t)(r->payload - data);
    if (!apply_content_lengths(status_end + 2, head_end, r))
        return;
    size_t ignored;
    if (!py_int(code, code_len, &ignored, r))
        return;
    for (; code_len > 1 && *code == '0'; code_len--) /* int() drops leading zeros: "HTTP {status}" shows it */
        code++;
    buf_append(&r->status, code, code_len);
    r->outcome = POST_ANSWERED;
}

static bool send_request(int fd, const buf *body, size_t content_length, int timeout_ms, post_result *r)
{
    buf head;
    buf_init(&head, 256);
    buf_puts(&head, "POST / HTTP/1.1\r\nHost: pyngress-cni\r\nContent-Type: application/json\r\n"
                    "Connection: close\r\nContent-Length: ");
    buf_put_size(&head, content_length);
    buf_puts(&head, "\r\n\r\n");
    bool sent = send_all(fd, head.data, head.len, timeout_ms, r) && send_all(fd, body->data, body->len, timeout_ms, r);
    buf_free(&head);
    if (!sent || body->len == content_length)
        return sent;
    /* The rest of the body never comes: once the server has begun to answer, say so, or it would linger
     * (aiohttp waits 10 s for the body it refused before it closes). Said before the answer, it would
     * take the client for gone and answer nothing. */
    int ready = wait_ready(fd, POLLIN, now_ms() + timeout_ms);
    if (ready <= 0)
        return wait_failed(r, ready);
    return shutdown(fd, SHUT_WR) == 0 || fail_errno(r, errno);
}

void http_post(const buf *socket_path, const buf *body, size_t content_length, int timeout_seconds,
               size_t response_max, post_result *r)
{
    buf path;
    buf_init(&path, socket_path->len + 1);
    buf_init(&r->message, 4096);
    buf_init(&r->response, response_max);
    buf_init(&r->status, MAX_INT_DIGITS + 1);
    r->payload = NULL;
    r->payload_len = 0;
    int timeout_ms = timeout_seconds * 1000;

    /* CPython's order: the socket first, then the address (its encoding, then its length), then connect. */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_un addr;
    socklen_t addr_len;
    if (fd < 0) {
        fail_errno(r, errno);
    } else if (!text_to_os_bytes(socket_path->data, socket_path->len, &path, &r->message)) {
        r->outcome = POST_FAILED;
    } else if (!unix_address(&path, &addr, &addr_len)) {
        fail_message(r, "AF_UNIX path too long");
    } else if (connect_with_timeout(fd, &addr, addr_len, timeout_ms, r) &&
               send_request(fd, body, content_length, timeout_ms, r) &&
               receive_all(fd, timeout_ms, response_max, r)) {
        parse_response(r);
    }
    if (fd >= 0)
        (void)close(fd); /* nothing was written that close could lose */
    buf_free(&path);
}

void post_result_free(post_result *r)
{
    buf_free(&r->message);
    buf_free(&r->response);
    buf_free(&r->status);
}
