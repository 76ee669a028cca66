/*
 * nginx variables by index, for the router's hottest reads and writes.
 *
 * ngx.var looks a variable up by name on every access: nginx lowercases the name and hashes it, about 20
 * instructions per character, then finds it in the hash. The router takes each variable's index once per worker
 * (ngx_http_pyngress_var_index, which nginx.conf's variables make possible: `pyngress_indexed_variables` gives the
 * ones nginx would not index on its own) and reads and writes by index.
 *
 * A write is what ngx.var's is for a variable of `set`: the value copied into the request's pool.
 */

#include "ngx_http_pyngress_module.h"


int ngx_http_pyngress_var_index(u_char *name, size_t len, int writable);
u_char *ngx_http_pyngress_var_get(ngx_http_request_t *r, int index, size_t *len);
int ngx_http_pyngress_var_set(ngx_http_request_t *r, int index, u_char *value, size_t len);


/* The index of variable `name` in this worker's configuration; -1 when it has none, or when `writable` and it is not
 * a variable of `set` (one with a handler of its own must be written through ngx.var). */
int
ngx_http_pyngress_var_index(u_char *name, size_t len, int writable)
{
    ngx_uint_t                  i;
    ngx_http_variable_t        *v;
    ngx_http_core_main_conf_t  *cmcf;

    cmcf = ngx_http_cycle_get_module_main_conf((ngx_cycle_t *) ngx_cycle, ngx_http_core_module);
    if (cmcf == NULL) {
        return -1;
    }
    v = cmcf->variables.elts;
    for (i = 0; i < cmcf->variables.nelts; i++) {
        if (v[i].name.len != len || ngx_strncasecmp(v[i].name.data, name, len) != 0) {
            continue;
        }
        if (writable && (v[i].set_handler != NULL || !(v[i].flags & NGX_HTTP_VAR_CHANGEABLE))) {
            return -1;
        }
        return (int) i;
    }
    return -1;
}


/* The value of variable `index` (*len bytes), NULL when it has none. */
u_char *
ngx_http_pyngress_var_get(ngx_http_request_t *r, int index, size_t *len)
{
    ngx_http_variable_value_t  *vv;

    vv = ngx_http_get_flushed_variable(r, (ngx_uint_t) index);
    if (vv == NULL || vv->not_found) {
        return NULL;
    }
    *len = vv->len;
    return vv->data;
}


/* Sets variable `index` (a variable of `set`) for `r`; `value` NULL unsets it, as ngx.var's nil does. 0, or -1 when out
 * of memory. */
int
ngx_http_pyngress_var_set(ngx_http_request_t *r, int index, u_char *value, size_t len)
{
    u_char                     *copy;
    ngx_http_variable_value_t  *vv;

    vv = &r->variables[index];
    if (value == NULL) {
        vv->data = NULL;
        vv->len = 0;
        vv->valid = 0;
        vv->no_cacheable = 0;
        vv->not_found = 1;
        return 0;
    }
    copy = ngx_pnalloc(r->pool, len ? len : 1);
    if (copy == NULL) {
        return -1;
    }
    ngx_memcpy(copy, value, len);
    vv->data = copy;
    vv->len = len;
    vv->valid = 1;
    vv->no_cacheable = 0;
    vv->not_found = 0;
    return 0;
}


/* pyngress_indexed_variables <name> ...: variables nginx.conf does not otherwise name (as $host), indexed so that
 * ngx_http_pyngress_var_index finds them. */
char *
ngx_http_pyngress_indexed_variables(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_str_t   *value = cf->args->elts;
    ngx_uint_t   i;

    for (i = 1; i < cf->args->nelts; i++) {
        if (ngx_http_get_variable_index(cf, &value[i]) == NGX_ERROR) {
            return NGX_CONF_ERROR;
        }
    }
    return NGX_CONF_OK;
}
