#include "json.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"

#define CP_END (-1) /* no more input */
#define CP_BAD (-2) /* input that does not decode: json.loads fails on the whole document */
#define MAX_INT_DIGITS 4300

/* ---- reading code points in the document's encoding ---- */

static uint32_t unit16(const unsigned char *p, bool big_endian)
{
    return big_endian ? (uint32_t)p[0] << 8 | p[1] : (uint32_t)p[1] << 8 | p[0];
}

static uint32_t unit32(const unsigned char *p, bool big_endian)
{
    return big_endian ? (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]
                      : (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

/* The code point at the cursor and its width in bytes; lone surrogates pass, as with "surrogatepass". */
static int32_t decode(const json_cursor *c, size_t *width)
{
    const unsigned char *p = c->data + c->pos;
    size_t left = c->len - c->pos;
    uint32_t cp;
    if (left == 0)
        return CP_END;
    switch (c->enc) {
    case JSON_UTF8: {
        size_t bad;
        *width = utf8_decode(p, left, true, &cp, &bad);
        return *width ? (int32_t)cp : CP_BAD;
    }
    case JSON_UTF16LE:
    case JSON_UTF16BE: {
        bool be = c->enc == JSON_UTF16BE;
        if (left < 2)
            return CP_BAD;
        cp = unit16(p, be);
        *width = 2;
        if (cp >= 0xD800 && cp <= 0xDBFF && left >= 4) {
            uint32_t low = unit16(p + 2, be);
            if (low >= 0xDC00 && low <= 0xDFFF) {
                *width = 4;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            }
        }
        return (int32_t)cp;
    }
    case JSON_UTF32LE:
    case JSON_UTF32BE:
        if (left < 4)
            return CP_BAD;
        cp = unit32(p, c->enc == JSON_UTF32BE);
        *width = 4;
        return cp > 0x10FFFF ? CP_BAD : (int32_t)cp;
    }
    return CP_BAD;
}

static int32_t peek(const json_cursor *c)
{
    size_t width;
    return decode(c, &width);
}

static int32_t next(json_cursor *c)
{
    size_t width = 0;
    int32_t cp = decode(c, &width);
    if (cp >= 0)
        c->pos += width;
    return cp;
}

/* json.detect_encoding, and the byte order mark its codec then skips. */
static void open_document(json_cursor *c, const unsigned char *b, size_t n)
{
    c->data = b;
    c->len = n;
    c->pos = 0;
    c->enc = JSON_UTF8;
    if (n >= 4 && (!memcmp(b, "\xFF\xFE\0\0", 4) || !memcmp(b, "\0\0\xFE\xFF", 4))) {
        c->enc = b[0] ? JSON_UTF32LE : JSON_UTF32BE;
        c->pos = 4;
    } else if (n >= 2 && (!memcmp(b, "\xFF\xFE", 2) || !memcmp(b, "\xFE\xFF", 2))) {
        c->enc = b[0] == 0xFF ? JSON_UTF16LE : JSON_UTF16BE;
        c->pos = 2;
    } else if (n >= 3 && !memcmp(b, "\xEF\xBB\xBF", 3)) {
        c->pos = 3;
    } else if (n >= 4) {
        if (!b[0])
            c->enc = b[1] ? JSON_UTF16BE : JSON_UTF32BE;
        else if (!b[1])
            c->enc = b[2] || b[3] ? JSON_UTF16LE : JSON_UTF32LE;
    } else if (n == 2) {
        if (!b[0])
            c->enc = JSON_UTF16BE;
        else if (!b[1])
            c->enc = JSON_UTF16LE;
    }
}

/* ---- the grammar, as Python's scanner (Modules/_json.c) applies it ---- */

static bool is_space(int32_t cp)
{
    return cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r';
}

static bool is_digit(int32_t cp)
{
    return cp >= '0' && cp <= '9';
}

static void skip_space(json_cursor *c)
{
    while (is_space(peek(c)))
        next(c);
}

static bool take(json_cursor *c, const char *word)
{
    for (; *word; word++)
        if (next(c) != *word)
            return false;
    return true;
}

static bool hex4(json_cursor *c, uint32_t *unit)
{
    *unit = 0;
    for (int k = 0; k < 4; k++) {
        int32_t d = next(c);
        uint32_t v;
        if (d >= '0' && d <= '9')
            v = (uint32_t)(d - '0');
        else if (d >= 'a' && d <= 'f')
            v = (uint32_t)(d - 'a' + 10);
        else if (d >= 'A' && d <= 'F')
            v = (uint32_t)(d - 'A' + 10);
        else
            return false;
        *unit = *unit << 4 | v;
    }
    return true;
}

/* A \uXXXX escape (after its "\u"): a high surrogate joins a low one escaped right after it; any other
 * surrogate stays alone. */
static bool unicode_escape(json_cursor *c, uint32_t *cp)
{
    if (!hex4(c, cp))
        return false;
    if (*cp >= 0xD800 && *cp <= 0xDBFF) {
        json_cursor after = *c;
        uint32_t low;
        if (next(&after) == '\\' && next(&after) == 'u') {
            if (!hex4(&after, &low))
                return false; /* Python reads these four digits and refuses them */
            if (low >= 0xDC00 && low <= 0xDFFF) {
                *cp = 0x10000 + ((*cp - 0xD800) << 10) + (low - 0xDC00);
                *c = after;
            }
        }
    }
    return true;
}

/* A string at the cursor; its text goes to *out unless out is NULL. */
static bool scan_string(json_cursor *c, buf *out)
{
    if (next(c) != '"')
        return false;
    for (;;) {
        int32_t cp = next(c);
        uint32_t ch;
        if (cp < ' ')
            return false; /* unterminated, undecodable, or a raw control character */
        if (cp == '"')
            return true;
        if (cp != '\\') {
            ch = (uint32_t)cp;
        } else {
            switch (next(c)) {
            case '"': ch = '"'; break;
            case '\\': ch = '\\'; break;
            case '/': ch = '/'; break;
            case 'b': ch = '\b'; break;
            case 'f': ch = '\f'; break;
            case 'n': ch = '\n'; break;
            case 'r': ch = '\r'; break;
            case 't': ch = '\t'; break;
            case 'u':
                if (!unicode_escape(c, &ch))
                    return false;
                break;
            default:
                return false;
            }
        }
        if (out)
            text_put(out, ch);
    }
}

/* A number at the cursor: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][-+]?[0-9]+)?, a fraction or an exponent
 * only when complete (else the scanner stops before it, and what follows fails). */
static bool scan_number(json_cursor *c, bool *is_int)
{
    size_t digits = 0;
    *is_int = true;
    if (peek(c) == '-')
        next(c);
    if (peek(c) == '0') {
        next(c);
        digits = 1;
    } else if (is_digit(peek(c))) {
        for (; is_digit(peek(c)); digits++)
            next(c);
    } else {
        return false;
    }
    json_cursor look = *c;
    if (next(&look) == '.' && is_digit(peek(&look))) {
        while (is_digit(peek(&look)))
            next(&look);
        *c = look;
        *is_int = false;
    }
    look = *c;
    int32_t e = next(&look);
    if (e == 'e' || e == 'E') {
        if (peek(&look) == '-' || peek(&look) == '+')
            next(&look);
        if (is_digit(peek(&look))) {
            while (is_digit(peek(&look)))
                next(&look);
            *c = look;
            *is_int = false;
        }
    }
    /* Python converts the integer and refuses one over its limit (a ValueError, like bad syntax). */
    return !*is_int || digits <= MAX_INT_DIGITS;
}

static bool skip_value(json_cursor *c, int depth);

static bool skip_object(json_cursor *c, int depth)
{
    next(c); /* { */
    skip_space(c);
    if (peek(c) == '}') {
        next(c);
        return true;
    }
    for (;;) {
        if (peek(c) != '"' || !scan_string(c, NULL))
            return false;
        skip_space(c);
        if (next(c) != ':')
            return false;
        skip_space(c);
        if (!skip_value(c, depth))
            return false;
        skip_space(c);
        int32_t cp = next(c);
        if (cp == '}')
            return true;
        if (cp != ',')
            return false;
        skip_space(c);
    }
}

static bool skip_array(json_cursor *c, int depth)
{
    next(c); /* [ */
    skip_space(c);
    if (peek(c) == ']') {
        next(c);
        return true;
    }
    for (;;) {
        if (!skip_value(c, depth))
            return false;
        skip_space(c);
        int32_t cp = next(c);
        if (cp == ']')
            return true;
        if (cp != ',')
            return false;
        skip_space(c);
    }
}

/* "-Infinity" at the cursor (else a '-' begins a number). */
static bool at_minus_infinity(const json_cursor *c)
{
    json_cursor look = *c;
    return take(&look, "-Infinity");
}

/* Checks the value at the cursor and moves past it; `depth` counts the containers around it. */
static bool skip_value(json_cursor *c, int depth)
{
    bool is_int;
    switch (peek(c)) {
    case '"': return scan_string(c, NULL);
    case '{': return depth < JSON_MAX_DEPTH && skip_object(c, depth + 1);
    case '[': return depth < JSON_MAX_DEPTH && skip_array(c, depth + 1);
    case 'n': return take(c, "null");
    case 't': return take(c, "true");
    case 'f': return take(c, "false");
    case 'N': return take(c, "NaN");
    case 'I': return take(c, "Infinity");
    case '-':
        if (at_minus_infinity(c))
            return take(c, "-Infinity");
        return scan_number(c, &is_int);
    default: return scan_number(c, &is_int);
    }
}

bool json_load(const unsigned char *data, size_t len, json_cursor *value)
{
    json_cursor c;
    open_document(&c, data, len);
    skip_space(&c);
    *value = c;
    if (!skip_value(&c, 0))
        return false;
    skip_space(&c);
    return peek(&c) == CP_END; /* "Extra data" otherwise; CP_BAD: a decoding error past the value */
}

bool json_is_object(json_cursor value)
{
    return peek(&value) == '{';
}

bool json_is_string(json_cursor value)
{
    return peek(&value) == '"';
}

bool json_is_int(json_cursor value)
{
    bool is_int;
    int32_t cp = peek(&value);
    if (cp == 't' || cp == 'f')
        return true;
    if (cp != '-' && !is_digit(cp))
        return false;
    return !at_minus_infinity(&value) && scan_number(&value, &is_int) && is_int;
}

bool json_string(json_cursor value, buf *out)
{
    return scan_string(&value, out) && !out->failed;
}

/* Walks the members of an object already checked; the last member named `key` wins, as in a dict. */
bool json_member(json_cursor object, const char *key, json_cursor *value)
{
    json_cursor c = object;
    size_t key_len = strlen(key);
    bool found = false;
    buf name;
    if (next(&c) != '{')
        return false;
    skip_space(&c);
    if (peek(&c) == '}')
        return false;
    buf_init(&name, c.len * 4 + 16);
    for (;;) {
        buf_clear(&name);
        if (!scan_string(&c, &name) || name.failed) {
            found = false; /* out of memory: better no answer than a wrong one */
            break;
        }
        skip_space(&c);
        next(&c); /* : */
        skip_space(&c);
        if (name.len == key_len && !memcmp(name.data, key, key_len)) {
            *value = c;
            found = true;
        }
        skip_value(&c, 1);
        skip_space(&c);
        if (next(&c) != ',')
            break;
        skip_space(&c);
    }
    buf_free(&name);
    return found;
}

/* ---- json.dumps ---- */

/* Decimal digits and exponent: the value DIGITS[0].DIGITS[1..] x 10^exponent. */
typedef struct {
    char digits[20];
    size_t count;
    int exponent;
} decimal;

static double read_back(const decimal *d)
{
    char text[48];
    snprintf(text, sizeof text, "%c.%.*se%d", d->digits[0], (int)d->count - 1, d->digits + 1, d->exponent);
    return strtod(text, NULL);
}

/* x > 0 rounded to `count` significant digits (printf rounds correctly). */
static void round_to(double x, size_t count, decimal *d)
{
    char text[48];
    snprintf(text, sizeof text, "%.*e", (int)count - 1, x);
    d->count = 0;
    const char *p = text;
    for (; *p != 'e'; p++)
        if (is_digit(*p))
            d->digits[d->count++] = *p;
    d->exponent = atoi(p + 1);
}

/* The next decimal of as many digits above d. */
static void step_up(decimal *d)
{
    size_t i = d->count;
    while (i > 0 && d->digits[i - 1] == '9')
        d->digits[--i] = '0';
    if (i > 0) {
        d->digits[i - 1]++;
    } else { /* 99..9 became 100..0: one more power of ten */
        d->digits[0] = '1';
        d->exponent++;
    }
}

/* The shortest digits that read back as x > 0, as repr() finds them: for each length, the decimal
 * nearest to x, or (just above a power of two, where doubles are closer together below than above) the
 * next one up, which may read back when the nearest, below x, does not. */
static void shortest(double x, decimal *d)
{
    for (size_t count = 1; count < 17; count++) {
        round_to(x, count, d);
        double back = read_back(d);
        if (back == x)
            break;
        if (back < x) {
            step_up(d);
            if (read_back(d) == x)
                break;
        }
        if (count == 16) {
            round_to(x, 17, d); /* 17 digits always read back */
            break;
        }
    }
    while (d->count > 1 && d->digits[d->count - 1] == '0')
        d->count--;
}

/* repr(float) for a finite x: the shortest digits, in fixed notation when the decimal exponent is in
 * [-4, 16), else in exponent notation (Python's 'r' format). */
static void put_float(buf *out, double x)
{
    decimal d;
    if (x == 0) { /* "%e" of zero has no significant digit to keep */
        buf_puts(out, signbit(x) ? "-0.0" : "0.0");
        return;
    }
    shortest(fabs(x), &d);
    int point = d.exponent + 1; /* digits before the decimal point */
    if (signbit(x))
        buf_putc(out, '-');
    if (point <= -4 || point > 16) {
        char exponent[8];
        buf_putc(out, (unsigned char)d.digits[0]);
        if (d.count > 1) {
            buf_putc(out, '.');
            buf_append(out, d.digits + 1, d.count - 1);
        }
        snprintf(exponent, sizeof exponent, "e%+03d", d.exponent);
        buf_puts(out, exponent);
    } else if (point <= 0) {
        buf_puts(out, "0.");
        for (int k = 0; k < -point; k++)
            buf_putc(out, '0');
        buf_append(out, d.digits, d.count);
    } else if ((size_t)point >= d.count) {
        buf_append(out, d.digits, d.count);
        for (size_t k = d.count; k < (size_t)point; k++)
            buf_putc(out, '0');
        buf_puts(out, ".0");
    } else {
        buf_append(out, d.digits, (size_t)point);
        buf_putc(out, '.');
        buf_append(out, d.digits + point, d.count - (size_t)point);
    }
}

/* A number as Python re-writes it: an int as it was ("-0" is 0), a float by its repr. */
static bool dump_number(json_cursor *c, buf *out)
{
    json_cursor start = *c;
    bool is_int;
    buf literal;
    if (!scan_number(c, &is_int))
        return false;
    buf_init(&literal, c->len + 1);
    while (start.pos < c->pos)
        buf_putc(&literal, (unsigned char)next(&start));
    bool ok = !literal.failed;
    if (ok && is_int)
        buf_puts(out, strcmp((char *)literal.data, "-0") ? (char *)literal.data : "0");
    else if (ok) {
        double x = strtod((char *)literal.data, NULL);
        if (isinf(x))
            buf_puts(out, x > 0 ? "Infinity" : "-Infinity");
        else
            put_float(out, x);
    }
    buf_free(&literal);
    return ok;
}

static bool dump_value(json_cursor *c, buf *out);

/* An object's members as dumped: the key's text, and where its value was written in the output. */
struct member {
    size_t key_at, key_len;     /* in members.keys */
    size_t value_at, value_len; /* in the output */
    size_t source;              /* the member whose value this one shows: a dict keeps a repeated key at
                                   its first place with its last value */
    bool dropped;               /* a repeat of an earlier member's key */
};

struct members {
    struct member *items;
    size_t count, cap;
    buf keys;
};

static bool add_member(struct members *m, const struct member *item)
{
    if (m->count == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 16;
        struct member *items = cap > SIZE_MAX / sizeof *items ? NULL : realloc(m->items, cap * sizeof *items);
        if (!items)
            return false;
        m->items = items;
        m->cap = cap;
    }
    m->items[m->count++] = *item;
    return true;
}

static bool same_key(const struct members *m, size_t a, size_t b)
{
    const struct member *x = &m->items[a], *y = &m->items[b];
    return x->key_len == y->key_len && !memcmp(m->keys.data + x->key_at, m->keys.data + y->key_at, x->key_len);
}

/* qsort has no context argument: the members being sorted (one sort at a time, never nested). */
static const struct members *sorting;

static int by_key_then_place(const void *a, const void *b)
{
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    const struct member *x = &sorting->items[i], *y = &sorting->items[j];
    size_t common = x->key_len < y->key_len ? x->key_len : y->key_len;
    int order = memcmp(sorting->keys.data + x->key_at, sorting->keys.data + y->key_at, common);
    if (order)
        return order;
    if (x->key_len != y->key_len)
        return x->key_len < y->key_len ? -1 : 1;
    return i < j ? -1 : 1;
}

/* Marks repeated keys (dropped, and the first one's source set to the last), *merged when there were
 * any; false only for want of memory. */
static bool merge_repeated_keys(struct members *m, bool *merged)
{
    size_t *order = malloc(m->count * sizeof *order);
    *merged = false;
    if (!order)
        return false;
    for (size_t i = 0; i < m->count; i++)
        order[i] = i;
    sorting = m;
    qsort(order, m->count, sizeof *order, by_key_then_place);
    sorting = NULL;
    for (size_t run = 0; run < m->count;) {
        size_t end = run + 1;
        while (end < m->count && same_key(m, order[run], order[end]))
            end++;
        m->items[order[run]].source = order[end - 1];
        for (size_t k = run + 1; k < end; k++) {
            m->items[order[k]].dropped = true;
            *merged = true;
        }
        run = end;
    }
    free(order);
    return true;
}

/* Writes the object again from what was written for it at out[start..]: the kept members in order. */
static bool rewrite_merged(const struct members *m, buf *out, size_t start)
{
    buf merged;
    buf_init(&merged, out->max);
    buf_putc(&merged, '{');
    bool first = true;
    for (size_t i = 0; i < m->count; i++) {
        const struct member *item = &m->items[i], *source = &m->items[item->source];
        if (item->dropped)
            continue;
        if (!first)
            buf_puts(&merged, ", ");
        first = false;
        json_put_string(&merged, m->keys.data + item->key_at, item->key_len);
        buf_puts(&merged, ": ");
        buf_append(&merged, out->data + source->value_at, source->value_len);
    }
    buf_putc(&merged, '}');
    out->len = start;
    bool ok = !merged.failed && buf_append(out, merged.data, merged.len);
    buf_free(&merged);
    return ok;
}

/* Members are written as they come, which costs nothing more when no key repeats (the usual case); an
 * object with a repeated key is then re-assembled from the pieces already written. */
static bool dump_object(json_cursor *c, buf *out)
{
    struct members m = {NULL, 0, 0, {0}};
    size_t start = out->len;
    bool ok = true, merged = false;
    buf_init(&m.keys, c->len * 4 + 16);
    next(c); /* { */
    buf_putc(out, '{');
    skip_space(c);
    if (peek(c) == '}')
        next(c);
    else
        for (;;) {
            struct member item = {m.keys.len, 0, 0, 0, m.count, false};
            ok = scan_string(c, &m.keys) && !m.keys.failed;
            item.key_len = m.keys.len - item.key_at;
            skip_space(c);
            ok = ok && next(c) == ':';
            skip_space(c);
            if (!ok)
                break;
            if (m.count)
                buf_puts(out, ", ");
            json_put_string(out, m.keys.data + item.key_at, item.key_len);
            buf_puts(out, ": ");
            item.value_at = out->len;
            ok = dump_value(c, out);
            item.value_len = out->len - item.value_at;
            ok = ok && add_member(&m, &item);
            skip_space(c);
            int32_t cp = next(c);
            if (!ok || cp == '}')
                break;
            ok = cp == ',';
            skip_space(c);
        }
    buf_putc(out, '}');
    if (ok && m.count > 1)
        ok = merge_repeated_keys(&m, &merged) && (!merged || rewrite_merged(&m, out, start));
    free(m.items);
    buf_free(&m.keys);
    return ok;
}

static bool dump_array(json_cursor *c, buf *out)
{
    next(c); /* [ */
    buf_putc(out, '[');
    skip_space(c);
    if (peek(c) == ']') {
        next(c);
        return buf_putc(out, ']');
    }
    for (bool first = true;; first = false) {
        if (!first)
            buf_puts(out, ", ");
        if (!dump_value(c, out))
            return false;
        skip_space(c);
        int32_t cp = next(c);
        if (cp == ']')
            return buf_putc(out, ']');
        if (cp != ',')
            return false;
        skip_space(c);
    }
}

static bool dump_value(json_cursor *c, buf *out)
{
    buf text;
    bool ok;
    switch (peek(c)) {
    case '"':
        buf_init(&text, c->len * 4 + 16);
        ok = scan_string(c, &text) && !text.failed;
        if (ok)
            json_put_string(out, text.data, text.len);
        buf_free(&text);
        return ok;
    case '{': return dump_object(c, out);
    case '[': return dump_array(c, out);
    case 'n': return take(c, "null") && buf_puts(out, "null");
    case 't': return take(c, "true") && buf_puts(out, "true");
    case 'f': return take(c, "false") && buf_puts(out, "false");
    case 'N': return take(c, "NaN") && buf_puts(out, "NaN");
    case 'I': return take(c, "Infinity") && buf_puts(out, "Infinity");
    case '-':
        if (at_minus_infinity(c))
            return take(c, "-Infinity") && buf_puts(out, "-Infinity");
        return dump_number(c, out);
    default: return dump_number(c, out);
    }
}

bool json_dump(json_cursor value, buf *out)
{
    return dump_value(&value, out) && !out->failed;
}
