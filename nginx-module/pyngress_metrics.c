/*
 * Per-request metrics, counted in nginx's log phase without Lua.
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
 */

#include <stdio.h>
#include <stdlib.h>

#include "ngx_http_pyngress_module.h"


static ngx_str_t  pg_source_names[] = {
    ngx_string("request_time"),
    ngx_string("upstream_response_time"),
    ngx_string("upstream_connect_time"),
    ngx_string("upstream_header_time"),
    ngx_string("request_length"),
    ngx_string("bytes_sent"),
    ngx_null_string
};

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


/* One labels key's numbers since the last batch; in a chained hash table. */
typedef struct pg_count_s  pg_count_t;

struct pg_count_s {
    pg_link_t    link;        /* first: the table's */
    ngx_uint_t   status;
    ngx_str_t   *method;      /* one of the main conf's methods, or its other_method */
    size_t       labels_len;
    u_char      *labels;      /* after the numbers, in the same allocation */
    double       numbers[];   /* width */
};

static pg_table_t   pg_counts;         /* this worker's, since the last batch */
static u_char      *pg_batch;          /* the last batch's text, kept until the next one */
static size_t       pg_batch_capacity;


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


/* The numbers of one key, made (all zero) when new; NULL when out of memory. */
static pg_count_t *
pg_count_of(pg_main_conf_t *mcf, u_char *labels, size_t len, ngx_uint_t status, ngx_str_t *method, ngx_log_t *log)
{
    ngx_uint_t   hash = pg_hash(labels, len, status, method);
    pg_link_t   *link;
    pg_count_t  *count;

    for (link = pg_table_chain(&pg_counts, hash); link; link = link->next) {
        count = (pg_count_t *) link;
        if (link->hash == hash && count->status == status && count->method == method
            && count->labels_len == len && ngx_memcmp(count->labels, labels, len) == 0)
        {
            return count;
        }
    }
    count = ngx_calloc(sizeof(pg_count_t) + mcf->width * sizeof(double) + len, log);
    if (count == NULL) {
        return NULL;
    }
    count->link.hash = hash;
    count->status = status;
    count->method = method;
    count->labels_len = len;
    count->labels = (u_char *) &count->numbers[mcf->width];
    ngx_memcpy(count->labels, labels, len);
    if (pg_table_add(&pg_counts, &count->link, log) != NGX_OK) {
        ngx_free(count);
        return NULL;
    }
    return count;
}


/* Adds `r` to this worker's counts. */
void
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
    pg_link_t       *link;
    pg_count_t      *count;
    pg_main_conf_t  *mcf;

    if (pg_counts.total == 0) {
        return 0;
    }
    mcf = ngx_http_cycle_get_module_main_conf(ngx_cycle, ngx_http_pyngress_module);
    for (i = 0; i < pg_counts.size; i++) {
        for (link = pg_counts.buckets[i]; link; link = link->next) {
            count = (pg_count_t *) link;
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
    for (i = 0; i < pg_counts.size; i++) {
        for (link = pg_counts.buckets[i]; link; link = link->next) {
            count = (pg_count_t *) link;
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
    pg_table_clear(&pg_counts);
}


char *
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


char *
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


char *
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
char *
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
