/*
 * load-balance ewma's measures (ewma.lua picks by them): the balancer marks a request it balanced by ewma
 * (ngx_http_pyngress_ewma_measure), and the request's log phase folds each endpoint it tried into that endpoint's
 * moving average of connect + response time, which decays with ingress-nginx's 10 s time constant. Here rather
 * than in log_by_lua, so that a request needs no Lua in its log phase.
 */

#include <math.h>

#include "ngx_http_pyngress_module.h"


#define PG_EWMA_DECAY_SECONDS  10.0

typedef struct pg_ewma_s  pg_ewma_t;

struct pg_ewma_s {
    pg_link_t    link;        /* first: the table's */
    double       seconds;
    double       at;          /* when it was last measured */
    size_t       name_len;
    u_char       name[];      /* "ip:port", as $upstream_addr names it */
};

static pg_table_t  pg_measures;   /* this worker's, never forgotten (an endpoint is a few bytes) */


static double
pg_now(void)
{
    ngx_time_t  *now = ngx_timeofday();

    return (double) now->sec + (double) now->msec / 1000;
}


static pg_ewma_t *
pg_ewma_find(u_char *name, size_t len, ngx_uint_t hash)
{
    pg_link_t  *link;
    pg_ewma_t  *entry;

    for (link = pg_table_chain(&pg_measures, hash); link; link = link->next) {
        entry = (pg_ewma_t *) link;
        if (link->hash == hash && entry->name_len == len && ngx_memcmp(entry->name, name, len) == 0) {
            return entry;
        }
    }
    return NULL;
}


/* A new endpoint's first measure; nothing when out of memory (it is measured again on its next request). */
static void
pg_ewma_add(u_char *name, size_t len, ngx_uint_t hash, double seconds, double now, ngx_log_t *log)
{
    pg_ewma_t  *entry;

    entry = ngx_alloc(sizeof(pg_ewma_t) + len, log);
    if (entry == NULL) {
        return;
    }
    entry->link.hash = hash;
    entry->seconds = seconds;
    entry->at = now;
    entry->name_len = len;
    ngx_memcpy(entry->name, name, len);
    if (pg_table_add(&pg_measures, &entry->link, log) != NGX_OK) {
        ngx_free(entry);
    }
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
void
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
