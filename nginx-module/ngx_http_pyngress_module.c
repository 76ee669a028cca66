/*
 * pyngress's per-request metrics, counted in nginx's log phase without Lua.
 *
 * Every request of a server with `pyngress_request_metrics on` is added to this worker's counts, keyed by the
 * route's metric labels (the variable pyngress_metrics_labels names, which the router sets), the status and the
 * method; the values observed are folded into the histograms pyngress_metrics_histogram declares, in order
 * (services/nginxconf/request_metrics.py describes the batch this makes). Once a second monitor.lua takes the
 * counts as one JSON batch through LuaJIT's FFI (ngx_http_pyngress_metrics_batch) and, once the shared dictionary
 * holds it, clears them (ngx_http_pyngress_metrics_clear): a batch the dictionary refused is made again, larger,
 * a second later, so no request is lost.
 *
 * Why C: in log_by_lua the same work cost about 7,500 instructions a request, most of it nginx formatting the
 * observed values as text for Lua to parse back; here they are read as numbers from the request.
 *
 * The counts live in the worker's own memory (each worker has its own after the fork); a worker that exits
 * hands its last batch over from monitor.lua's timer, which runs once more then.
 *
 * load-balance ewma's measures are taken here too (ewma.lua picks by them): the balancer marks a request it
 * balanced by ewma (ngx_http_pyngress_ewma_measure), and its log phase folds each endpoint's connect + response time
 * into that endpoint's average. With both here, a request needs no Lua in its log phase.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>


/* What a histogram observes: the value of the nginx variable of the same name, as a number. */
typedef enum {
    PG_REQUEST_TIME = 0,
    PG_UPSTREAM_RESPONSE_TIME,
    PG_UPSTREAM_CONNECT_TIME,
    PG_UPSTREAM_HEADER_TIME,
    PG_REQUEST_LENGTH,
    PG_BYTES_SENT
} pg_source_e;

static ngx_str_t  pg_source_names[] = {
    ngx_string("request_time"),
    ngx_string("upstream_response_time"),
    ngx_string("upstream_connect_time"),
    ngx_string("upstream_header_time"),
    ngx_string("request_length"),
    ngx_string("bytes_sent"),
    ngx_null_string
};

/* A request on a host no Ingress defines (empty labels). */
typedef enum {
    PG_UNDEFINED_SKIP = 0,   /* not counted (ingress-nginx's default) */
    PG_UNDEFINED_OWN,        /* counted under the request's host (--metrics-per-undefined-host) */
    PG_UNDEFINED_TOGETHER    /* counted under empty labels (--metrics-per-host=false) */
} pg_undefined_e;

static ngx_str_t  pg_undefined_names[] = {
    ngx_string("skip"),
    ngx_string("own"),
    ngx_string("together"),
    ngx_null_string
};

/* The labels after the host: no namespace, ingress, service, path or canary. */
#define PG_EMPTY_LABELS      "\t\t\t\t\t"
/* The host label is the client's: cut to a DNS name's longest, so that its length is not the client's either. */
#define PG_MAX_HOST_LENGTH   253

typedef struct {
    ngx_uint_t   source;      /* pg_source_e */
    double      *bounds;      /* ascending */
    ngx_uint_t   nbounds;
    ngx_uint_t   offset;      /* its first bucket among a key's numbers; then one above the last bound, the sum */
} pg_histogram_t;

typedef struct {
    ngx_array_t  histograms;      /* pg_histogram_t, in batch order */
    ngx_uint_t   width;           /* numbers per key: the request count, then each histogram's */
    ngx_int_t    labels_index;    /* NGX_CONF_UNSET until pyngress_metrics_labels */
    ngx_int_t    host_index;
    ngx_uint_t   undefined_hosts; /* pg_undefined_e */
    ngx_array_t  methods;         /* ngx_str_t: counted under their own name */
    ngx_str_t    other_method;    /* every other method */
} pg_main_conf_t;

typedef struct {
    ngx_flag_t   enable;
} pg_loc_conf_t;


/* One labels key's numbers since the last batch; in a chained hash table. */
typedef struct pg_count_s  pg_count_t;

struct pg_count_s {
    pg_count_t  *next;
    ngx_uint_t   hash;
    ngx_uint_t   status;
    ngx_str_t   *method;      /* one of the main conf's methods, or its other_method */
    size_t       labels_len;
    u_char      *labels;      /* after the numbers, in the same allocation */
    double       numbers[];   /* width */
};

static pg_count_t  **pg_table;        /* this worker's counts */
static ngx_uint_t    pg_table_size;   /* buckets, a power of two */
static ngx_uint_t    pg_count_total;  /* keys held */
static u_char       *pg_batch;        /* the last batch's text, kept until the next one */
static size_t        pg_batch_capacity;

#define PG_FIRST_TABLE_SIZE  64


/* load-balance ewma: an endpoint's moving average of its connect + response time, decaying with this time
 * constant (ingress-nginx's). */
#define PG_EWMA_DECAY_SECONDS  10.0

typedef struct pg_ewma_s  pg_ewma_t;

struct pg_ewma_s {
    pg_ewma_t   *next;
    ngx_uint_t   hash;
    double       seconds;
    double       at;          /* when it was last measured */
    size_t       name_len;
    u_char       name[];      /* "ip:port", as $upstream_addr names it */
};

static pg_ewma_t   **pg_ewma_table;   /* this worker's measures, never forgotten (an endpoint is a few bytes) */
static ngx_uint_t    pg_ewma_size;    /* buckets, a power of two */
static ngx_uint_t    pg_ewma_total;

/* The request's mark for a measure (its module context). */
typedef struct {
    unsigned     measure_ewma:1;
} pg_request_t;


static ngx_int_t ngx_http_pyngress_init(ngx_conf_t *cf);
static void *ngx_http_pyngress_create_main_conf(ngx_conf_t *cf);
static char *ngx_http_pyngress_init_main_conf(ngx_conf_t *cf, void *conf);
static void *ngx_http_pyngress_create_loc_conf(ngx_conf_t *cf);
static char *ngx_http_pyngress_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child);
static char *ngx_http_pyngress_labels(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_pyngress_histogram(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_pyngress_undefined_hosts(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_pyngress_methods(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);

size_t ngx_http_pyngress_metrics_batch(u_char **out);
void ngx_http_pyngress_metrics_clear(void);
int ngx_http_pyngress_ewma_measure(ngx_http_request_t *r);
double ngx_http_pyngress_ewma_score(u_char *name, size_t len, double now);


static ngx_command_t  ngx_http_pyngress_commands[] = {

    { ngx_string("pyngress_request_metrics"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_FLAG,
      ngx_conf_set_flag_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(pg_loc_conf_t, enable),
      NULL },

    { ngx_string("pyngress_metrics_labels"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_http_pyngress_labels,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("pyngress_metrics_histogram"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_2MORE,
      ngx_http_pyngress_histogram,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("pyngress_metrics_undefined_hosts"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_http_pyngress_undefined_hosts,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("pyngress_metrics_methods"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_2MORE,
      ngx_http_pyngress_methods,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

      ngx_null_command
};


static ngx_http_module_t  ngx_http_pyngress_module_ctx = {
    NULL,                                  /* preconfiguration */
    ngx_http_pyngress_init,                /* postconfiguration */
    ngx_http_pyngress_create_main_conf,    /* create main configuration */
    ngx_http_pyngress_init_main_conf,      /* init main configuration */
    NULL,                                  /* create server configuration */
    NULL,                                  /* merge server configuration */
    ngx_http_pyngress_create_loc_conf,     /* create location configuration */
    ngx_http_pyngress_merge_loc_conf       /* merge location configuration */
};


ngx_module_t  ngx_http_pyngress_module = {
    NGX_MODULE_V1,
    &ngx_http_pyngress_module_ctx,
    ngx_http_pyngress_commands,
    NGX_HTTP_MODULE,
    NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    NGX_MODULE_V1_PADDING
};


/* The status as $status gives it. */
static ngx_uint_t
pg_status(ngx_http_request_t *r)
{
    if (r->err_status) {
        return r->err_status;
    }
    if (r->headers_out.status) {
        return r->headers_out.status;
    }
    return r->http_version == NGX_HTTP_VERSION_9 ? 9 : 0;
}


/* The method's name in the counts: its own when listed, else the other method's. */
static ngx_str_t *
pg_method(pg_main_conf_t *mcf, ngx_http_request_t *r)
{
    ngx_str_t   *name = &r->main->method_name, *known = mcf->methods.elts;
    ngx_uint_t   i;

    for (i = 0; i < mcf->methods.nelts; i++) {
        if (known[i].len == name->len && ngx_memcmp(known[i].data, name->data, name->len) == 0) {
            return &known[i];
        }
    }
    return &mcf->other_method;
}


/* An upstream time of this request in seconds, when it has exactly one (a retried request lists several, a
 * request nginx answered itself none: neither is observed, as in ingress-nginx). */
static ngx_int_t
pg_upstream_time(ngx_http_request_t *r, pg_source_e source, double *value)
{
    ngx_msec_int_t              ms;
    ngx_http_upstream_state_t  *state;

    if (r->upstream_states == NULL || r->upstream_states->nelts != 1) {
        return NGX_DECLINED;
    }
    state = r->upstream_states->elts;
    ms = source == PG_UPSTREAM_RESPONSE_TIME ? state->response_time
         : source == PG_UPSTREAM_CONNECT_TIME ? state->connect_time : state->header_time;
    if (ms == -1) {
        return NGX_DECLINED;
    }
    *value = (double) ngx_max(ms, 0) / 1000;
    return NGX_OK;
}


/* The value a histogram observes for `r`, as its nginx variable would read (milliseconds as seconds). */
static ngx_int_t
pg_observed(ngx_http_request_t *r, pg_source_e source, double *value)
{
    ngx_time_t      *now;
    ngx_msec_int_t   ms;

    switch (source) {
    case PG_REQUEST_TIME:
        now = ngx_timeofday();
        ms = (ngx_msec_int_t) ((now->sec - r->start_sec) * 1000 + (now->msec - r->start_msec));
        *value = (double) ngx_max(ms, 0) / 1000;
        return NGX_OK;
    case PG_REQUEST_LENGTH:
        *value = (double) r->request_length;
        return NGX_OK;
    case PG_BYTES_SENT:
        *value = (double) r->connection->sent;
        return NGX_OK;
    default:
        return pg_upstream_time(r, source, value);
    }
}


static ngx_uint_t
pg_hash(u_char *labels, size_t len, ngx_uint_t status, ngx_str_t *method)
{
    ngx_uint_t  key = ngx_hash_key(labels, len);

    return (key * 31 + status) * 31 + (ngx_uint_t) (uintptr_t) method / sizeof(ngx_str_t);
}


/* Doubles the table (load factor 1) so that a lookup stays short; on failure the table keeps working as is. */
static void
pg_grow(ngx_log_t *log)
{
    ngx_uint_t    size = pg_table_size ? pg_table_size * 2 : PG_FIRST_TABLE_SIZE, i;
    pg_count_t  **table, *count, *next;

    table = ngx_calloc(size * sizeof(pg_count_t *), log);
    if (table == NULL) {
        return;
    }
    for (i = 0; i < pg_table_size; i++) {
        for (count = pg_table[i]; count; count = next) {
            next = count->next;
            count->next = table[count->hash & (size - 1)];
            table[count->hash & (size - 1)] = count;
        }
    }
    ngx_free(pg_table);
    pg_table = table;
    pg_table_size = size;
}


/* The numbers of one key, made (all zero) when new; NULL when out of memory. */
static pg_count_t *
pg_count_of(pg_main_conf_t *mcf, u_char *labels, size_t len, ngx_uint_t status, ngx_str_t *method, ngx_log_t *log)
{
    ngx_uint_t   hash = pg_hash(labels, len, status, method);
    pg_count_t  *count;

    if (pg_table_size) {
        for (count = pg_table[hash & (pg_table_size - 1)]; count; count = count->next) {
            if (count->hash == hash && count->status == status && count->method == method
                && count->labels_len == len && ngx_memcmp(count->labels, labels, len) == 0)
            {
                return count;
            }
        }
    }
    if (pg_count_total >= pg_table_size) {
        pg_grow(log);
        if (pg_table_size == 0) {
            return NULL;
        }
    }
    count = ngx_calloc(sizeof(pg_count_t) + mcf->width * sizeof(double) + len, log);
    if (count == NULL) {
        return NULL;
    }
    count->hash = hash;
    count->status = status;
    count->method = method;
    count->labels_len = len;
    count->labels = (u_char *) &count->numbers[mcf->width];
    ngx_memcpy(count->labels, labels, len);
    count->next = pg_table[hash & (pg_table_size - 1)];
    pg_table[hash & (pg_table_size - 1)] = count;
    pg_count_total++;
    return count;
}


/* Adds `r` to this worker's counts. */
static void
pg_count_request(ngx_http_request_t *r)
{
    u_char                      host_labels[PG_MAX_HOST_LENGTH + sizeof(PG_EMPTY_LABELS) - 1], *labels;
    size_t                      len, i;
    double                      value;
    ngx_uint_t                  h, slot;
    pg_count_t                 *count;
    pg_main_conf_t             *mcf;
    pg_histogram_t             *histogram;
    ngx_http_variable_value_t  *vv;

    mcf = ngx_http_get_module_main_conf(r, ngx_http_pyngress_module);

    vv = ngx_http_get_indexed_variable(r, mcf->labels_index);
    if (vv != NULL && !vv->not_found && vv->len > 0) {
        labels = vv->data;
        len = vv->len;

    } else if (mcf->undefined_hosts == PG_UNDEFINED_SKIP) {
        return;

    } else if (mcf->undefined_hosts == PG_UNDEFINED_TOGETHER) {
        labels = (u_char *) PG_EMPTY_LABELS;
        len = sizeof(PG_EMPTY_LABELS) - 1;

    } else {
        /* The client's Host as the host label: a tab or newline in it would move the labels after it. */
        vv = ngx_http_get_indexed_variable(r, mcf->host_index);
        len = (vv == NULL || vv->not_found) ? 0 : ngx_min(vv->len, PG_MAX_HOST_LENGTH);
        for (i = 0; i < len; i++) {
            host_labels[i] = (vv->data[i] == '\t' || vv->data[i] == '\n') ? ' ' : vv->data[i];
        }
        ngx_memcpy(host_labels + len, PG_EMPTY_LABELS, sizeof(PG_EMPTY_LABELS) - 1);
        labels = host_labels;
        len += sizeof(PG_EMPTY_LABELS) - 1;
    }

    count = pg_count_of(mcf, labels, len, pg_status(r), pg_method(mcf, r), r->connection->log);
    if (count == NULL) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "request metrics: out of memory, request not counted");
        return;
    }

    count->numbers[0] += 1;
    histogram = mcf->histograms.elts;
    for (h = 0; h < mcf->histograms.nelts; h++, histogram++) {
        if (pg_observed(r, histogram->source, &value) != NGX_OK) {
            continue;
        }
        /* The first bound the value is at or below; above the last, the bucket after it. */
        for (slot = 0; slot < histogram->nbounds && value > histogram->bounds[slot]; slot++) { /* void */ }
        count->numbers[histogram->offset + slot] += 1;
        count->numbers[histogram->offset + histogram->nbounds + 1] += value;
    }
}


static double
pg_now(void)
{
    ngx_time_t  *now = ngx_timeofday();

    return (double) now->sec + (double) now->msec / 1000;
}


static pg_ewma_t *
pg_ewma_find(u_char *name, size_t len, ngx_uint_t hash)
{
    pg_ewma_t  *entry;

    if (pg_ewma_size == 0) {
        return NULL;
    }
    for (entry = pg_ewma_table[hash & (pg_ewma_size - 1)]; entry; entry = entry->next) {
        if (entry->hash == hash && entry->name_len == len && ngx_memcmp(entry->name, name, len) == 0) {
            return entry;
        }
    }
    return NULL;
}


/* A new endpoint's first measure; nothing when out of memory (it is measured again on its next request). */
static void
pg_ewma_add(u_char *name, size_t len, ngx_uint_t hash, double seconds, double now, ngx_log_t *log)
{
    ngx_uint_t   size, i;
    pg_ewma_t  **table, *entry, *next;

    if (pg_ewma_total >= pg_ewma_size) {
        size = pg_ewma_size ? pg_ewma_size * 2 : PG_FIRST_TABLE_SIZE;
        table = ngx_calloc(size * sizeof(pg_ewma_t *), log);
        if (table == NULL) {
            return;
        }
        for (i = 0; i < pg_ewma_size; i++) {
            for (entry = pg_ewma_table[i]; entry; entry = next) {
                next = entry->next;
                entry->next = table[entry->hash & (size - 1)];
                table[entry->hash & (size - 1)] = entry;
            }
        }
        ngx_free(pg_ewma_table);
        pg_ewma_table = table;
        pg_ewma_size = size;
    }
    entry = ngx_alloc(sizeof(pg_ewma_t) + len, log);
    if (entry == NULL) {
        return;
    }
    entry->hash = hash;
    entry->seconds = seconds;
    entry->at = now;
    entry->name_len = len;
    ngx_memcpy(entry->name, name, len);
    entry->next = pg_ewma_table[hash & (pg_ewma_size - 1)];
    pg_ewma_table[hash & (pg_ewma_size - 1)] = entry;
    pg_ewma_total++;
}


/* Whether `name` is "<address>:<port>" (not a Unix socket's path). */
static ngx_int_t
pg_has_port(ngx_str_t *name)
{
    size_t  i = name->len;

    while (i > 0 && name->data[i - 1] >= '0' && name->data[i - 1] <= '9') {
        i--;
    }
    return i > 0 && i < name->len && name->data[i - 1] == ':';
}


/* Folds the time of each endpoint `r` tried (a retried request tried several) into its average. */
static void
pg_ewma_record(ngx_http_request_t *r)
{
    double                      now = pg_now(), seconds, weight;
    ngx_uint_t                  i, hash;
    ngx_msec_int_t              response, connect;
    pg_ewma_t                  *entry;
    ngx_http_upstream_state_t  *state;

    if (r->upstream_states == NULL) {
        return;
    }
    state = r->upstream_states->elts;
    for (i = 0; i < r->upstream_states->nelts; i++) {
        if (state[i].peer == NULL || !pg_has_port(state[i].peer)) {
            continue;
        }
        /* the times are unsigned, -1 when not known; as in $upstream_response_time, a time is taken as signed */
        response = (ngx_msec_int_t) state[i].response_time;
        connect = (ngx_msec_int_t) state[i].connect_time;
        seconds = (double) (ngx_max(response, 0) + ngx_max(connect, 0)) / 1000;
        hash = ngx_hash_key(state[i].peer->data, state[i].peer->len);
        entry = pg_ewma_find(state[i].peer->data, state[i].peer->len, hash);
        if (entry == NULL) {
            pg_ewma_add(state[i].peer->data, state[i].peer->len, hash, seconds, now, r->connection->log);
            continue;
        }
        weight = exp((entry->at - now) / PG_EWMA_DECAY_SECONDS);
        entry->seconds = entry->seconds * weight + seconds * (1 - weight);
        entry->at = now;
    }
}


/* Marks `r` (balanced by ewma) for its log phase to measure. 0: done; -1: out of memory (not measured). */
int
ngx_http_pyngress_ewma_measure(ngx_http_request_t *r)
{
    pg_request_t  *ctx;

    ctx = ngx_http_get_module_ctx(r, ngx_http_pyngress_module);
    if (ctx == NULL) {
        ctx = ngx_pcalloc(r->pool, sizeof(pg_request_t));
        if (ctx == NULL) {
            return -1;
        }
        ngx_http_set_ctx(r, ctx, ngx_http_pyngress_module);
    }
    ctx->measure_ewma = 1;
    return 0;
}


/* The endpoint's average at `now` (seconds since the epoch), decayed since its last measure; 0 when this worker
 * never measured it, so that a new endpoint is tried. */
double
ngx_http_pyngress_ewma_score(u_char *name, size_t len, double now)
{
    pg_ewma_t  *entry = pg_ewma_find(name, len, ngx_hash_key(name, len));

    return entry ? entry->seconds * exp((entry->at - now) / PG_EWMA_DECAY_SECONDS) : 0;
}


static ngx_int_t
ngx_http_pyngress_log_handler(ngx_http_request_t *r)
{
    pg_loc_conf_t  *lcf;
    pg_request_t   *ctx;

    lcf = ngx_http_get_module_loc_conf(r, ngx_http_pyngress_module);
    if (lcf->enable) {
        pg_count_request(r);
    }
    ctx = ngx_http_get_module_ctx(r, ngx_http_pyngress_module);
    if (ctx != NULL && ctx->measure_ewma) {
        pg_ewma_record(r);
    }
    return NGX_OK;
}


/* `text` as the inside of a JSON string. Bytes from 0x80 pass as they are, as cjson passes them. */
static u_char *
pg_json_escape(u_char *p, u_char *text, size_t len)
{
    static const char  hex[] = "0123456789abcdef";
    size_t              i;
    u_char              c;

    for (i = 0; i < len; i++) {
        c = text[i];
        if (c == '"' || c == '\\') {
            *p++ = '\\';
            *p++ = c;
        } else if (c == '\t') {
            *p++ = '\\';
            *p++ = 't';
        } else if (c == '\n') {
            *p++ = '\\';
            *p++ = 'n';
        } else if (c < 0x20) {
            p = ngx_cpymem(p, "\\u00", 4);
            *p++ = hex[c >> 4];
            *p++ = hex[c & 0xf];
        } else {
            *p++ = c;
        }
    }
    return p;
}


/* This worker's counts since the last clear as one JSON object, {"<labels>\t<status>\t<method>": [numbers]};
 * *out points to it until the next call. 0: nothing counted (or out of memory, logged; the counts stay). */
size_t
ngx_http_pyngress_metrics_batch(u_char **out)
{
    size_t           size = 2;
    u_char          *p;
    ngx_uint_t       i, n;
    pg_count_t      *count;
    pg_main_conf_t  *mcf;

    if (pg_count_total == 0) {
        return 0;
    }
    mcf = ngx_http_cycle_get_module_main_conf(ngx_cycle, ngx_http_pyngress_module);
    for (i = 0; i < pg_table_size; i++) {
        for (count = pg_table[i]; count; count = count->next) {
            /* "key": [n,...], with every label byte escaped at most 6 times over and %.17g numbers */
            size += count->labels_len * 6 + count->method->len + sizeof("\"\\t000\\t\":[],") + mcf->width * 26;
        }
    }
    if (size > pg_batch_capacity) {
        p = ngx_alloc(size, ngx_cycle->log);
        if (p == NULL) {
            return 0;
        }
        ngx_free(pg_batch);
        pg_batch = p;
        pg_batch_capacity = size;
    }

    p = pg_batch;
    *p++ = '{';
    for (i = 0; i < pg_table_size; i++) {
        for (count = pg_table[i]; count; count = count->next) {
            if (p != pg_batch + 1) {
                *p++ = ',';
            }
            *p++ = '"';
            p = pg_json_escape(p, count->labels, count->labels_len);
            p = ngx_sprintf(p, "\\t%03ui\\t", count->status);
            p = pg_json_escape(p, count->method->data, count->method->len);
            p = ngx_cpymem(p, "\":[", 3);
            for (n = 0; n < mcf->width; n++) {
                p += snprintf((char *) p, 26, n ? ",%.17g" : "%.17g", count->numbers[n]);
            }
            *p++ = ']';
        }
    }
    *p++ = '}';
    *out = pg_batch;
    return p - pg_batch;
}


/* Forgets the counts, once their batch is in the shared dictionary. */
void
ngx_http_pyngress_metrics_clear(void)
{
    ngx_uint_t   i;
    pg_count_t  *count, *next;

    for (i = 0; i < pg_table_size; i++) {
        for (count = pg_table[i]; count; count = next) {
            next = count->next;
            ngx_free(count);
        }
        pg_table[i] = NULL;
    }
    pg_count_total = 0;
}


static char *
ngx_http_pyngress_labels(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    pg_main_conf_t  *mcf = conf;
    ngx_str_t       *value = cf->args->elts, name;

    if (mcf->labels_index != NGX_CONF_UNSET) {
        return "is duplicate";
    }
    if (value[1].len < 2 || value[1].data[0] != '$') {
        return "takes a variable, as $name";
    }
    name.data = value[1].data + 1;
    name.len = value[1].len - 1;
    mcf->labels_index = ngx_http_get_variable_index(cf, &name);
    return mcf->labels_index == NGX_ERROR ? NGX_CONF_ERROR : NGX_CONF_OK;
}


static char *
ngx_http_pyngress_histogram(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    pg_main_conf_t  *mcf = conf;
    ngx_str_t       *value = cf->args->elts;
    pg_histogram_t  *histogram;
    ngx_uint_t       i, source;
    char            *end;

    for (source = 0; pg_source_names[source].len; source++) {
        if (value[1].len == pg_source_names[source].len
            && ngx_strncmp(value[1].data, pg_source_names[source].data, value[1].len) == 0)
        {
            break;
        }
    }
    if (pg_source_names[source].len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "unknown observed value \"%V\": use request_time, "
                           "upstream_response_time, upstream_connect_time, upstream_header_time, request_length "
                           "or bytes_sent", &value[1]);
        return NGX_CONF_ERROR;
    }
    histogram = ngx_array_push(&mcf->histograms);
    if (histogram == NULL) {
        return NGX_CONF_ERROR;
    }
    histogram->source = source;
    histogram->nbounds = cf->args->nelts - 2;
    histogram->bounds = ngx_palloc(cf->pool, histogram->nbounds * sizeof(double));
    if (histogram->bounds == NULL) {
        return NGX_CONF_ERROR;
    }
    for (i = 0; i < histogram->nbounds; i++) {
        /* nginx ends every word it reads with a NUL */
        histogram->bounds[i] = strtod((char *) value[i + 2].data, &end);
        if (value[i + 2].len == 0 || end != (char *) value[i + 2].data + value[i + 2].len
            || (i > 0 && histogram->bounds[i] <= histogram->bounds[i - 1]))
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "bucket bound \"%V\" is not a number above the one before it",
                               &value[i + 2]);
            return NGX_CONF_ERROR;
        }
    }
    return NGX_CONF_OK;
}


static char *
ngx_http_pyngress_undefined_hosts(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    pg_main_conf_t  *mcf = conf;
    ngx_str_t       *value = cf->args->elts, host = ngx_string("host");
    ngx_uint_t       mode;

    for (mode = 0; pg_undefined_names[mode].len; mode++) {
        if (value[1].len == pg_undefined_names[mode].len
            && ngx_strncmp(value[1].data, pg_undefined_names[mode].data, value[1].len) == 0)
        {
            break;
        }
    }
    if (pg_undefined_names[mode].len == 0) {
        return "takes skip, own or together";
    }
    mcf->undefined_hosts = mode;
    if (mode == PG_UNDEFINED_OWN) {
        mcf->host_index = ngx_http_get_variable_index(cf, &host);
        if (mcf->host_index == NGX_ERROR) {
            return NGX_CONF_ERROR;
        }
    }
    return NGX_CONF_OK;
}


/* pyngress_metrics_methods <other method> <method> ...: the methods counted under their own name; any other
 * (nginx takes any upper-case token as one) is counted under the first word, so that clients cannot add series. */
static char *
ngx_http_pyngress_methods(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    pg_main_conf_t  *mcf = conf;
    ngx_str_t       *value = cf->args->elts, *method;
    ngx_uint_t       i;

    mcf->other_method = value[1];
    for (i = 2; i < cf->args->nelts; i++) {
        method = ngx_array_push(&mcf->methods);
        if (method == NULL) {
            return NGX_CONF_ERROR;
        }
        *method = value[i];
    }
    return NGX_CONF_OK;
}


static void *
ngx_http_pyngress_create_main_conf(ngx_conf_t *cf)
{
    pg_main_conf_t  *mcf;

    mcf = ngx_pcalloc(cf->pool, sizeof(pg_main_conf_t));
    if (mcf == NULL) {
        return NULL;
    }
    if (ngx_array_init(&mcf->histograms, cf->pool, 8, sizeof(pg_histogram_t)) != NGX_OK
        || ngx_array_init(&mcf->methods, cf->pool, 40, sizeof(ngx_str_t)) != NGX_OK)
    {
        return NULL;
    }
    mcf->labels_index = NGX_CONF_UNSET;
    mcf->undefined_hosts = PG_UNDEFINED_SKIP;
    ngx_str_set(&mcf->other_method, "_OTHER");
    return mcf;
}


/* Each histogram's place among a key's numbers. */
static char *
ngx_http_pyngress_init_main_conf(ngx_conf_t *cf, void *conf)
{
    pg_main_conf_t  *mcf = conf;
    pg_histogram_t  *histogram = mcf->histograms.elts;
    ngx_uint_t       h;

    mcf->width = 1;
    for (h = 0; h < mcf->histograms.nelts; h++) {
        histogram[h].offset = mcf->width;
        mcf->width += histogram[h].nbounds + 2;
    }
    return NGX_CONF_OK;
}


static void *
ngx_http_pyngress_create_loc_conf(ngx_conf_t *cf)
{
    pg_loc_conf_t  *lcf;

    lcf = ngx_palloc(cf->pool, sizeof(pg_loc_conf_t));
    if (lcf == NULL) {
        return NULL;
    }
    lcf->enable = NGX_CONF_UNSET;
    return lcf;
}


static char *
ngx_http_pyngress_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child)
{
    pg_loc_conf_t   *prev = parent, *lcf = child;
    pg_main_conf_t  *mcf;

    ngx_conf_merge_value(lcf->enable, prev->enable, 0);
    if (lcf->enable) {
        mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_pyngress_module);
        if (mcf->labels_index == NGX_CONF_UNSET) {
            return "needs pyngress_metrics_labels: the variable holding the route's labels";
        }
    }
    return NGX_CONF_OK;
}


static ngx_int_t
ngx_http_pyngress_init(ngx_conf_t *cf)
{
    ngx_http_handler_pt        *handler;
    ngx_http_core_main_conf_t  *cmcf;

    cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);
    handler = ngx_array_push(&cmcf->phases[NGX_HTTP_LOG_PHASE].handlers);
    if (handler == NULL) {
        return NGX_ERROR;
    }
    *handler = ngx_http_pyngress_log_handler;
    return NGX_OK;
}
