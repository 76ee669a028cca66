/* pyngress-cni-static: the pyngress CNI plugin as a static binary, for nodes without Python.
 *
 * It does what services/cni_plugin/main.py (the reference) does, with the same output byte for byte:
 * read the CNI_* environment and the network configuration on stdin; answer VERSION itself; send every
 * other call as `POST /` with {"env": {CNI_* variables}, "config": "<base64 of stdin>"} to the CNI
 * server's Unix socket (the configuration's "serverSocket", else $PYNGRESS_CNI_SOCKET, else
 * /var/run/pyngress/cni/cni-server.sock); print a 200 answer's body with exit status 0, and anything
 * else as a CNI error JSON with exit status 1. Where the reference's output comes from Python itself
 * (json.loads, json.dumps, exception messages), this program words it the same way; see README.md for
 * the few inputs where it cannot. */
#define _GNU_SOURCE /* memmem */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "http.h"
#include "json.h"
#include "text.h"

extern char **environ;

/* The same as proto.cni.SUPPORTED_VERSIONS (a test keeps them equal through VERSION). */
static const char *const SUPPORTED_VERSIONS[] = {"0.4.0", "1.0.0", "1.1.0"};
#define NEWEST_VERSION "1.1.0"
#define DEFAULT_SOCKET "/var/run/pyngress/cni/cni-server.sock"
/* Longer than the server's own 2-minute request timeout, so that its answer (code 11) is what we print.
 * Tests build a copy with a short one. */
#ifndef TIMEOUT_SECONDS
#define TIMEOUT_SECONDS 150
#endif
enum { IO_FAILURE = 5, TRY_AGAIN_LATER = 11, INTERNAL = 100 };

/* The server takes request bodies up to 1 MiB; a configuration several times that size is not held
 * (see send_request). Other bounds are far above anything a CNI call produces. */
#define STDIN_MAX ((size_t)4 << 20)
#define RESPONSE_MAX ((size_t)4 << 20)
#define TEXT_MAX ((size_t)64 << 20)

/* ---- output ---- */

static void write_all(int fd, const unsigned char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return; /* nobody reads stdout: nothing left to tell */
        data += n;
        len -= (size_t)n;
    }
}

/* What is left to say when memory (or a buffer's ceiling) ran out. */
static int print_out_of_memory(void)
{
    static const char OOM[] = "{\"cniVersion\": \"" NEWEST_VERSION "\", \"code\": 100, \"msg\": "
                              "\"pyngress-cni-static ran out of memory\", \"details\": \"\"}\n";
    write_all(STDOUT_FILENO, (const unsigned char *)OOM, sizeof OOM - 1);
    return 1;
}

/* Prints a document and a newline. */
static int print_line(buf *document, int exit_status)
{
    if (!buf_putc(document, '\n'))
        return print_out_of_memory();
    write_all(STDOUT_FILENO, document->data, document->len);
    return exit_status;
}

/* ---- the network configuration on stdin ---- */

typedef struct {
    buf data;      /* stdin, up to STDIN_MAX bytes */
    size_t total;  /* how many bytes stdin had */
    int read_error;
    bool parsed;
    bool is_object;
    json_cursor root;
} network_config;

static void read_stdin(network_config *config)
{
    unsigned char chunk[65536];
    buf_init(&config->data, STDIN_MAX);
    config->total = 0;
    config->read_error = 0;
    config->parsed = false;
    for (;;) {
        ssize_t n = read(STDIN_FILENO, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            config->read_error = errno;
        if (n <= 0)
            return;
        config->total += (size_t)n;
        /* Past the limit, the rest is read (the runtime is not left writing to a closed pipe) and
         * counted, not kept. */
        if (config->data.len + (size_t)n <= STDIN_MAX)
            buf_append(&config->data, chunk, (size_t)n);
    }
}

static bool held_whole(const network_config *config)
{
    return config->data.len == config->total;
}

/* The configuration as a JSON object; false when it is not one (the Python plugin then reads it as {}
 * and lets the server say what is wrong). */
static bool config_object(network_config *config, json_cursor *root)
{
    if (!config->parsed) {
        config->parsed = true;
        config->is_object = held_whole(config) &&
                            json_load(config->data.data, config->data.len, &config->root) &&
                            json_is_object(config->root);
    }
    *root = config->root;
    return config->is_object;
}

/* A top-level member's text when it is a string. */
static bool config_string(network_config *config, const char *key, buf *text)
{
    json_cursor root, value;
    return config_object(config, &root) && json_member(root, key, &value) && json_is_string(value) &&
           json_string(value, text);
}

/* The cniVersion an error is reported in: the configuration's when this plugin speaks it. */
static const char *reply_version(network_config *config)
{
    buf version;
    const char *reply = NEWEST_VERSION;
    buf_init(&version, TEXT_MAX);
    if (config_string(config, "cniVersion", &version))
        for (size_t i = 0; i < sizeof SUPPORTED_VERSIONS / sizeof *SUPPORTED_VERSIONS; i++)
            if (version.len == strlen(SUPPORTED_VERSIONS[i]) && !memcmp(version.data, SUPPORTED_VERSIONS[i], version.len))
                reply = SUPPORTED_VERSIONS[i];
    buf_free(&version);
    return reply;
}

/* ---- answers ---- */

static int print_error(network_config *config, int code, const buf *msg, const char *details, size_t details_len)
{
    buf out;
    buf_init(&out, TEXT_MAX);
    buf_puts(&out, "{\"cniVersion\": ");
    const char *version = reply_version(config);
    json_put_string(&out, (const unsigned char *)version, strlen(version));
    buf_puts(&out, ", \"code\": ");
    buf_put_size(&out, (size_t)code);
    buf_puts(&out, ", \"msg\": ");
    json_put_string(&out, msg->data, msg->failed ? 0 : msg->len);
    buf_puts(&out, ", \"details\": ");
    json_put_string(&out, (const unsigned char *)details, details_len);
    buf_putc(&out, '}');
    out.failed = out.failed || msg->failed;
    int status = print_line(&out, 1);
    buf_free(&out);
    return status;
}

/* VERSION: the requested version (any non-empty string, as the reference echoes it) and ours. */
static int answer_version(network_config *config)
{
    buf requested, out;
    buf_init(&requested, TEXT_MAX);
    buf_init(&out, TEXT_MAX);
    buf_puts(&out, "{\"cniVersion\": ");
    if (config_string(config, "cniVersion", &requested) && requested.len > 0)
        json_put_string(&out, requested.data, requested.len);
    else
        buf_puts(&out, "\"" NEWEST_VERSION "\"");
    buf_puts(&out, ", \"supportedVersions\": [");
    for (size_t i = 0; i < sizeof SUPPORTED_VERSIONS / sizeof *SUPPORTED_VERSIONS; i++) {
        buf_puts(&out, i ? ", \"" : "\"");
        buf_puts(&out, SUPPORTED_VERSIONS[i]);
        buf_putc(&out, '"');
    }
    buf_puts(&out, "]}");
    out.failed = out.failed || requested.failed;
    int status = print_line(&out, 0);
    buf_free(&requested);
    buf_free(&out);
    return status;
}

/* serverSocket (read only when stdin mentions it, as the reference does), else $PYNGRESS_CNI_SOCKET,
 * else the default; as text, for the messages and for the path's own encoding rules. */
static void server_socket(network_config *config, buf *path)
{
    if (memmem(config->data.data ? (const void *)config->data.data : "", config->data.len, "serverSocket", 12) &&
        config_string(config, "serverSocket", path) && path->len > 0)
        return;
    buf_clear(path);
    const char *from_env = getenv("PYNGRESS_CNI_SOCKET");
    if (from_env && *from_env)
        text_from_os_bytes(path, (const unsigned char *)from_env, strlen(from_env));
    else
        buf_puts(path, DEFAULT_SOCKET);
}

/* ---- the request ---- */

/* The length of an environment entry's name; 0 when it has no '=' (Python skips those). */
static size_t name_length(const char *entry)
{
    const char *equals = strchr(entry, '=');
    return equals ? (size_t)(equals - entry) : 0;
}

static bool same_name(const char *a, const char *b)
{
    size_t n = name_length(a);
    return n == name_length(b) && !memcmp(a, b, n);
}

/* qsort has no context argument: the environment being sorted. */
static char **sorting_environ;

static int by_name_then_place(const void *a, const void *b)
{
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    const char *x = sorting_environ[i], *y = sorting_environ[j];
    size_t nx = name_length(x), ny = name_length(y);
    int order = memcmp(x, y, nx < ny ? nx : ny);
    if (order)
        return order;
    if (nx != ny)
        return nx < ny ? -1 : 1;
    return i < j ? -1 : 1;
}

/* Which CNI_* entries os.environ holds: the first of each name (it is built with dict.setdefault), in
 * the environment's order. keep[i] is set for those. */
static bool cni_entries(char **env, size_t count, bool *keep)
{
    size_t *order = malloc((count ? count : 1) * sizeof *order), found = 0;
    if (!order)
        return false;
    for (size_t i = 0; i < count; i++) {
        keep[i] = false;
        if (!strncmp(env[i], "CNI_", 4) && name_length(env[i]) >= 4)
            order[found++] = i;
    }
    sorting_environ = env;
    qsort(order, found, sizeof *order, by_name_then_place);
    sorting_environ = NULL;
    for (size_t k = 0; k < found; k++)
        keep[order[k]] = k == 0 || !same_name(env[order[k]], env[order[k - 1]]);
    free(order);
    return true;
}

/* {"env":{...},"config":" — the part of the body before the configuration. */
static bool body_start(buf *body)
{
    size_t count = 0;
    while (environ && environ[count])
        count++;
    bool *keep = malloc((count ? count : 1) * sizeof *keep);
    if (!keep || !cni_entries(environ, count, keep)) {
        free(keep);
        return false;
    }
    buf_puts(body, "{\"env\":{");
    bool first = true;
    for (size_t i = 0; i < count; i++) {
        if (!keep[i])
            continue;
        size_t name = name_length(environ[i]);
        const char *value = environ[i] + name + 1;
        if (!first)
            buf_putc(body, ',');
        first = false;
        body_put_string(body, (const unsigned char *)environ[i], name);
        buf_putc(body, ':');
        body_put_string(body, (const unsigned char *)value, strlen(value));
    }
    buf_puts(body, "},\"config\":\"");
    free(keep);
    return !body->failed;
}

/* ---- the answer ---- */

/* Nothing but whitespace, as bytes.strip() sees it. */
static bool blank(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!ascii_space(s[i]))
            return false;
    return true;
}

/* 200: the body as it came (the CNI result, or nothing for DEL and CHECK), with one final newline. */
static int print_result(const post_result *r)
{
    size_t len = r->payload_len;
    if (blank(r->payload, len))
        return 0;
    while (len > 0 && r->payload[len - 1] == '\n')
        len--;
    write_all(STDOUT_FILENO, r->payload, len);
    write_all(STDOUT_FILENO, (const unsigned char *)"\n", 1);
    return 0;
}

/* Not 200: the server's CNI error as json.loads + json.dumps re-write it, or code 100 quoting it. */
static int print_server_error(network_config *config, const buf *path, const post_result *r)
{
    json_cursor error, code;
    buf out, msg, details;
    int status;
    buf_init(&out, TEXT_MAX);
    if (json_load(r->payload, r->payload_len, &error) && json_is_object(error) &&
        json_member(error, "code", &code) && json_is_int(code)) {
        json_dump(error, &out); /* fails only for want of memory, which print_line reports */
        status = print_line(&out, 1);
    } else {
        buf_init(&msg, TEXT_MAX);
        buf_init(&details, TEXT_MAX);
        buf_puts(&msg, "the CNI server at ");
        buf_append(&msg, path->data, path->len);
        buf_puts(&msg, " answered HTTP ");
        buf_append(&msg, r->status.data, r->status.len);
        buf_puts(&msg, " without a CNI error");
        text_from_utf8_replace(&details, r->payload, r->payload_len < 500 ? r->payload_len : 500);
        status = print_error(config, INTERNAL, &msg, (const char *)details.data, details.len);
        buf_free(&msg);
        buf_free(&details);
    }
    buf_free(&out);
    return status;
}

/* The server could not be asked: code 5 when the socket is not ours to use, else code 11. */
static int print_unreachable(network_config *config, const buf *path, const post_result *r)
{
    buf msg;
    int status;
    bool permission = r->outcome == POST_OS_ERROR && (r->errno_value == EACCES || r->errno_value == EPERM);
    buf_init(&msg, TEXT_MAX);
    buf_puts(&msg, permission ? "cannot connect to the CNI server at " : "the CNI server at ");
    buf_append(&msg, path->data, path->len);
    buf_puts(&msg, permission ? ": " : " is not answering: ");
    if (r->outcome == POST_OS_ERROR)
        buf_puts(&msg, os_error_text(r->errno_value));
    else
        buf_append(&msg, r->message.data, r->message.len);
    if (permission) {
        static const char DETAILS[] = "the socket is root-only: the container runtime must run pyngress-cni as root";
        status = print_error(config, IO_FAILURE, &msg, DETAILS, sizeof DETAILS - 1);
    } else {
        static const char DETAILS[] = "start `pyngress cniserver` (or point serverSocket / $PYNGRESS_CNI_SOCKET at its socket)";
        status = print_error(config, TRY_AGAIN_LATER, &msg, DETAILS, sizeof DETAILS - 1);
    }
    buf_free(&msg);
    return status;
}

static int forward(network_config *config)
{
    buf path, body;
    post_result r;
    int status;
    buf_init(&path, TEXT_MAX);
    buf_init(&body, TEXT_MAX);
    server_socket(config, &path);
    if (path.failed || !body_start(&body)) {
        buf_free(&path);
        buf_free(&body);
        return print_out_of_memory();
    }
    /* The whole body when stdin was held whole; else only its announced length, which the server
     * refuses from the request's head (code 7, over its limit), as it refuses the reference's body. */
    size_t length = body.len + base64_length(config->total) + 2;
    if (held_whole(config)) {
        base64_put(&body, config->data.data, config->data.len);
        buf_puts(&body, "\"}");
    } else {
        buf_clear(&body);
    }
    if (body.failed) {
        buf_free(&path);
        buf_free(&body);
        return print_out_of_memory();
    }
    http_post(&path, &body, length, TIMEOUT_SECONDS, RESPONSE_MAX, &r);
    if (r.outcome != POST_ANSWERED)
        status = print_unreachable(config, &path, &r);
    else if (r.status.len == 3 && !memcmp(r.status.data, "200", 3))
        status = print_result(&r);
    else
        status = print_server_error(config, &path, &r);
    post_result_free(&r);
    buf_free(&path);
    buf_free(&body);
    return status;
}

int main(void)
{
    network_config config;
    /* A closed stdout must come back as an error from write, not kill the plugin (sockets are written
     * with MSG_NOSIGNAL); should this fail, the default only matters once nobody reads the answer. */
    (void)signal(SIGPIPE, SIG_IGN);
    read_stdin(&config);
    const char *command = getenv("CNI_COMMAND");
    int status;
    if (config.read_error) { /* the reference dies with a traceback here; an error says more */
        buf msg;
        buf_init(&msg, 256);
        buf_puts(&msg, "cannot read the network configuration on stdin: ");
        buf_puts(&msg, os_error_text(config.read_error));
        status = print_error(&config, INTERNAL, &msg, "", 0);
        buf_free(&msg);
    } else if (command && !strcmp(command, "VERSION")) {
        status = answer_version(&config);
    } else {
        status = forward(&config);
    }
    buf_free(&config.data);
    return status;
}
