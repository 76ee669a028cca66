/*
 * pyngress's nginx module (see ngx_http_pyngress_module.c): what its parts share.
 */

#ifndef NGX_HTTP_PYNGRESS_MODULE_H
#define NGX_HTTP_PYNGRESS_MODULE_H

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>


/* What a histogram observes: the value of the nginx variable of the same name, as a number. */
typedef enum {
    PG_REQUEST_TIME = 0,
    PG_UPSTREAM_RESPONSE_TIME,
    PG_UPSTREAM_CONNECT_TIME,
    PG_UPSTREAM_HEADER_TIME,
    PG_REQUEST_LENGTH,
    PG_BYTES_SENT
} pg_source_e;

/* A request on a host no Ingress defines (empty labels). */
typedef enum {
    PG_UNDEFINED_SKIP = 0,   /* not counted (ingress-nginx's default) */
    PG_UNDEFINED_OWN,        /* counted under the request's host (--metrics-per-undefined-host) */
    PG_UNDEFINED_TOGETHER    /* counted under empty labels (--metrics-per-host=false) */
} pg_undefined_e;

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
    ngx_flag_t   enable;          /* pyngress_request_metrics */
} pg_loc_conf_t;

/* An upstream block's balancing (pyngress_balancer): what ran before the module took over. */
typedef struct {
    ngx_http_upstream_init_pt       original_init_upstream;
    ngx_http_upstream_init_peer_pt  original_init_peer;
} pg_upstream_conf_t;

/* A request's marks (its module context; an internal redirect clears it). */
typedef struct {
    unsigned     measure_ewma:1;
} pg_request_t;

/* A per-worker hash table (pyngress_table.c): entries begin with a pg_link_t. */
typedef struct pg_link_s  pg_link_t;

struct pg_link_s {
    pg_link_t   *next;
    ngx_uint_t   hash;
};

typedef struct {
    pg_link_t  **buckets;
    ngx_uint_t   size;        /* buckets, a power of two */
    ngx_uint_t   total;       /* entries */
} pg_table_t;

#define PG_FIRST_TABLE_SIZE  64

/* The entries whose hash falls where `hash` does, to compare with the key; NULL when none. */
#define pg_table_chain(table, hash)                                                                          \
    ((table)->size ? (table)->buckets[(hash) & ((table)->size - 1)] : NULL)


extern ngx_module_t  ngx_http_pyngress_module;


/* pyngress_table.c */
ngx_int_t pg_table_add(pg_table_t *table, pg_link_t *link, ngx_log_t *log);
void pg_table_clear(pg_table_t *table);

/* pyngress_metrics.c */
void pg_count_request(ngx_http_request_t *r);
char *ngx_http_pyngress_labels(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
char *ngx_http_pyngress_histogram(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
char *ngx_http_pyngress_undefined_hosts(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
char *ngx_http_pyngress_methods(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
size_t ngx_http_pyngress_metrics_batch(u_char **out);
void ngx_http_pyngress_metrics_clear(void);

/* pyngress_ewma.c */
void pg_ewma_record(ngx_http_request_t *r);
int ngx_http_pyngress_ewma_measure(ngx_http_request_t *r);
double ngx_http_pyngress_ewma_score(u_char *name, size_t len, double now);

/* pyngress_variables.c */
char *ngx_http_pyngress_indexed_variables(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);

/* pyngress_balancer.c */
char *ngx_http_pyngress_balancer(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);


#endif /* NGX_HTTP_PYNGRESS_MODULE_H */
