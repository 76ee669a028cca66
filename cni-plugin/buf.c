#include "buf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void buf_init(buf *b, size_t max)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max;
    b->failed = false;
}

void buf_free(buf *b)
{
    free(b->data);
    buf_init(b, b->max);
}

void buf_clear(buf *b)
{
    b->len = 0;
    b->failed = false;
}

static bool fail(buf *b)
{
    b->failed = true;
    return false;
}

/* Room for n more bytes and a NUL after them (so that data can be handed to strtod and the like). */
static bool reserve(buf *b, size_t n)
{
    if (b->failed || n > b->max - b->len)
        return fail(b);
    size_t need = b->len + n + 1;
    if (need <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    unsigned char *data = realloc(b->data, cap);
    if (data == NULL)
        return fail(b);
    b->data = data;
    b->cap = cap;
    return true;
}

bool buf_append(buf *b, const void *data, size_t n)
{
    if (!reserve(b, n))
        return false;
    if (n)
        memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
    return true;
}

bool buf_putc(buf *b, unsigned char c)
{
    return buf_append(b, &c, 1);
}

bool buf_puts(buf *b, const char *s)
{
    return buf_append(b, s, strlen(s));
}

bool buf_put_size(buf *b, size_t n)
{
    char digits[24];
    size_t i = sizeof digits;
    do {
        digits[--i] = (char)('0' + n % 10);
        n /= 10;
    } while (n);
    return buf_append(b, digits + i, sizeof digits - i);
}
