/*
 * The per-worker hash tables of the metrics' counts and of ewma's measures: entries chained by hash, each
 * beginning with a pg_link_t, in buckets that double when the table holds as many entries (a lookup stays short).
 */

#include "ngx_http_pyngress_module.h"


/* Adds `link` (its hash set) to `table`, made or grown first when it is full. NGX_ERROR when out of memory for a
 * first table; a table that cannot grow takes it all the same, in longer chains. */
ngx_int_t
pg_table_add(pg_table_t *table, pg_link_t *link, ngx_log_t *log)
{
    ngx_uint_t    size, i;
    pg_link_t   **buckets, *entry, *next;

    if (table->total >= table->size) {
        size = table->size ? table->size * 2 : PG_FIRST_TABLE_SIZE;
        buckets = ngx_calloc(size * sizeof(pg_link_t *), log);
        if (buckets != NULL) {
            for (i = 0; i < table->size; i++) {
                for (entry = table->buckets[i]; entry; entry = next) {
                    next = entry->next;
                    entry->next = buckets[entry->hash & (size - 1)];
                    buckets[entry->hash & (size - 1)] = entry;
                }
            }
            ngx_free(table->buckets);
            table->buckets = buckets;
            table->size = size;
        } else if (table->size == 0) {
            return NGX_ERROR;
        }
    }
    link->next = table->buckets[link->hash & (table->size - 1)];
    table->buckets[link->hash & (table->size - 1)] = link;
    table->total++;
    return NGX_OK;
}


/* Frees every entry (each one allocation with ngx_alloc); the buckets stay for the next ones. */
void
pg_table_clear(pg_table_t *table)
{
    ngx_uint_t   i;
    pg_link_t   *entry, *next;

    for (i = 0; i < table->size; i++) {
        for (entry = table->buckets[i]; entry; entry = next) {
            next = entry->next;
            ngx_free(entry);
        }
        table->buckets[i] = NULL;
    }
    table->total = 0;
}
