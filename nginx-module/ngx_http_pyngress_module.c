/*
 * pyngress's own nginx module: the parts of a request's path that cost too much in Lua.
 *
 * - pyngress_metrics.c: the per-request metrics, counted in the log phase (pyngress_request_metrics and the
 *   pyngress_metrics_* directives);
 * - pyngress_ewma.c: load-balance ewma's measures, taken in the log phase;
 * - pyngress_variables.c: variables by index, for the router's hottest reads and writes;
 * - pyngress_balancer.c: the balancer of the upstreams with `pyngress_balancer`, which takes the peer the router
 *   chose through the FFI, and hands the requests it did not choose for to balancer_by_lua.
 *
 * Lua reaches the module through LuaJIT's FFI (templates/lua/pyngress/native.lua declares what it calls): nginx
 * loads dynamic modules with RTLD_GLOBAL, so their functions are visible to ffi.C.
 *
 * Built by `make setup` against Debian's nginx source (nginx-dev) with the flags Debian built nginx with.
 */

#include "ngx_http_pyngress_module.h"


static ngx_int_t ngx_http_pyngress_init(ngx_conf_t *cf);
static void *ngx_http_pyngress_create_main_conf(ngx_conf_t *cf);
static char *ngx_http_pyngress_init_main_conf(ngx_conf_t *cf, void *conf);
static void *ngx_http_pyngress_create_srv_conf(ngx_conf_t *cf);
static void *ngx_http_pyngress_create_loc_conf(ngx_conf_t *cf);
static char *ngx_http_pyngress_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child);


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

    { ngx_string("pyngress_indexed_variables"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_1MORE,
      ngx_http_pyngress_indexed_variables,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("pyngress_balancer"),
      NGX_HTTP_UPS_CONF|NGX_CONF_NOARGS,
      ngx_http_pyngress_balancer,
      NGX_HTTP_SRV_CONF_OFFSET,
      0,
      NULL },

      ngx_null_command
};


static ngx_http_module_t  ngx_http_pyngress_module_ctx = {
    NULL,                                  /* preconfiguration */
    ngx_http_pyngress_init,                /* postconfiguration */
    ngx_http_pyngress_create_main_conf,    /* create main configuration */
    ngx_http_pyngress_init_main_conf,      /* init main configuration */
    ngx_http_pyngress_create_srv_conf,     /* create server configuration (an upstream's too) */
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
ngx_http_pyngress_create_srv_conf(ngx_conf_t *cf)
{
    return ngx_pcalloc(cf->pool, sizeof(pg_upstream_conf_t));
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
