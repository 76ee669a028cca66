/* A growable byte buffer with a ceiling. Every append is checked: a buffer that would pass its ceiling,
 * or that cannot get memory, is marked failed and keeps what it had, so callers test `failed` once at
 * the end of a series of appends instead of after each one. */
#ifndef PYNGRESS_CNI_BUF_H
#define PYNGRESS_CNI_BUF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    unsigned char *data;
    size_t len;
    size_t cap;
    size_t max; /* the ceiling on len */
    bool failed;
} buf;

void buf_init(buf *b, size_t max);
void buf_free(buf *b);
void buf_clear(buf *b);
bool buf_append(buf *b, const void *data, size_t n);
bool buf_putc(buf *b, unsigned char c);
bool buf_puts(buf *b, const char *s);
/* Appends n in decimal. */
bool buf_put_size(buf *b, size_t n);

#endif
