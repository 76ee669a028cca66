#include "text.h"

#include <string.h>

static const char HEX[] = "0123456789abcdef";

bool ascii_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

size_t utf8_decode(const unsigned char *s, size_t n, bool surrogates, uint32_t *cp, size_t *bad)
{
    unsigned char c = s[0];
    /* The valid range of the second byte depends on the first (no overlong forms, nothing above
     * U+10FFFF, and no surrogates unless asked); later bytes are any continuation byte. */
    unsigned char lo = 0x80, hi = 0xBF;
    size_t more;
    uint32_t value;
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
        more = 1;
        value = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        more = 2;
        value = c & 0x0F;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED && !surrogates)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        more = 3;
        value = c & 0x07;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else {
        *bad = 1;
        return 0;
    }
    for (size_t k = 1; k <= more; k++) {
        if (k >= n || s[k] < lo || s[k] > hi) {
            *bad = k;
            return 0;
        }
        value = value << 6 | (s[k] & 0x3F);
        lo = 0x80;
        hi = 0xBF;
    }
    *cp = value;
    return more + 1;
}

void text_put(buf *out, uint32_t cp)
{
    unsigned char b[4];
    size_t n;
    if (cp < 0x80) {
        b[0] = (unsigned char)cp;
        n = 1;
    } else if (cp < 0x800) {
        b[0] = (unsigned char)(0xC0 | cp >> 6);
        b[1] = (unsigned char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        b[0] = (unsigned char)(0xE0 | cp >> 12);
        b[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        b[2] = (unsigned char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        b[0] = (unsigned char)(0xF0 | cp >> 18);
        b[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
        b[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        b[3] = (unsigned char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    buf_append(out, b, n);
}

uint32_t text_next(const unsigned char *s, size_t n, size_t *i)
{
    uint32_t cp;
    size_t bad;
    size_t len = utf8_decode(s + *i, n - *i, true, &cp, &bad);
    if (len == 0) { /* not text this program made: show it rather than loop */
        *i += 1;
        return 0xFFFD;
    }
    *i += len;
    return cp;
}

void text_from_os_bytes(buf *out, const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t bad;
        size_t len = utf8_decode(s + i, n - i, false, &cp, &bad);
        if (len) {
            buf_append(out, s + i, len);
            i += len;
        } else {
            /* Each byte of an invalid sequence on its own: the bytes after its first are continuation
             * bytes, which never begin a valid sequence either. */
            text_put(out, 0xDC00u + s[i]);
            i += 1;
        }
    }
}

void text_from_utf8_replace(buf *out, const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t bad;
        size_t len = utf8_decode(s + i, n - i, false, &cp, &bad);
        if (len) {
            buf_append(out, s + i, len);
            i += len;
        } else {
            text_put(out, 0xFFFD);
            i += bad;
        }
    }
}

static bool is_surrogate(uint32_t cp)
{
    return cp >= 0xD800 && cp <= 0xDFFF;
}

/* Python's UnicodeEncodeError message for the characters [start, end) of a string. */
static void encode_error(buf *err, uint32_t first, size_t start, size_t end)
{
    buf_puts(err, "'utf-8' codec can't encode ");
    if (end - start == 1) {
        buf_puts(err, "character '\\u");
        for (int shift = 12; shift >= 0; shift -= 4)
            buf_putc(err, (unsigned char)HEX[first >> shift & 0xF]);
        buf_puts(err, "' in position ");
        buf_put_size(err, start);
    } else {
        buf_puts(err, "characters in position ");
        buf_put_size(err, start);
        buf_putc(err, '-');
        buf_put_size(err, end - 1);
    }
    buf_puts(err, ": surrogates not allowed");
}

bool text_to_os_bytes(const unsigned char *s, size_t n, buf *out, buf *err)
{
    size_t index = 0; /* in code points, as Python counts positions */
    for (size_t i = 0; i < n; index++) {
        size_t at = i;
        uint32_t cp = text_next(s, n, &i);
        if (!is_surrogate(cp)) {
            buf_append(out, s + at, i - at);
        } else if (cp >= 0xDC80 && cp <= 0xDCFF) {
            buf_putc(out, (unsigned char)(cp - 0xDC00));
        } else {
            /* Python reports from this character to the end of the run of surrogates it is in. */
            size_t end = index + 1;
            for (size_t j = i; j < n && is_surrogate(text_next(s, n, &j));)
                end++;
            encode_error(err, cp, index, end);
            return false;
        }
    }
    return true;
}

static void put_u_escape(buf *out, uint32_t unit)
{
    char esc[6] = {'\\', 'u', HEX[unit >> 12 & 0xF], HEX[unit >> 8 & 0xF], HEX[unit >> 4 & 0xF], HEX[unit & 0xF]};
    buf_append(out, esc, sizeof esc);
}

void json_put_string(buf *out, const unsigned char *s, size_t n)
{
    buf_putc(out, '"');
    for (size_t i = 0; i < n;) {
        uint32_t cp = text_next(s, n, &i);
        const char *short_form = NULL;
        switch (cp) {
        case '"': short_form = "\\\""; break;
        case '\\': short_form = "\\\\"; break;
        case '\b': short_form = "\\b"; break;
        case '\f': short_form = "\\f"; break;
        case '\n': short_form = "\\n"; break;
        case '\r': short_form = "\\r"; break;
        case '\t': short_form = "\\t"; break;
        }
        if (short_form) {
            buf_puts(out, short_form);
        } else if (cp >= ' ' && cp <= '~') {
            buf_putc(out, (unsigned char)cp);
        } else if (cp >= 0x10000) { /* as a UTF-16 surrogate pair */
            put_u_escape(out, 0xD800 + ((cp - 0x10000) >> 10));
            put_u_escape(out, 0xDC00 + ((cp - 0x10000) & 0x3FF));
        } else {
            put_u_escape(out, cp);
        }
    }
    buf_putc(out, '"');
}

void body_put_string(buf *out, const unsigned char *s, size_t n)
{
    buf_putc(out, '"');
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t bad;
        size_t len = utf8_decode(s + i, n - i, false, &cp, &bad);
        if (len == 0) {
            put_u_escape(out, 0xDC00u + s[i]); /* the surrogate Python decoded the byte to */
            i += 1;
            continue;
        }
        if (cp == '"' || cp == '\\') {
            buf_putc(out, '\\');
            buf_putc(out, (unsigned char)cp);
        } else if (cp < ' ') {
            put_u_escape(out, cp);
        } else {
            buf_append(out, s + i, len);
        }
        i += len;
    }
    buf_putc(out, '"');
}

void bytes_repr(buf *out, const unsigned char *s, size_t n)
{
    unsigned char quote = memchr(s, '\'', n) && !memchr(s, '"', n) ? '"' : '\'';
    buf_putc(out, 'b');
    buf_putc(out, quote);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        if (c == quote || c == '\\') {
            buf_putc(out, '\\');
            buf_putc(out, c);
        } else if (c == '\t') {
            buf_puts(out, "\\t");
        } else if (c == '\n') {
            buf_puts(out, "\\n");
        } else if (c == '\r') {
            buf_puts(out, "\\r");
        } else if (c < ' ' || c >= 0x7F) {
            char esc[4] = {'\\', 'x', HEX[c >> 4], HEX[c & 0xF]};
            buf_append(out, esc, sizeof esc);
        } else {
            buf_putc(out, c);
        }
    }
    buf_putc(out, quote);
}

size_t base64_length(size_t n)
{
    return (n / 3 + (n % 3 != 0)) * 4;
}

void base64_put(buf *out, const unsigned char *s, size_t n)
{
    static const char ALPHABET[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        uint32_t group = (uint32_t)s[i] << 16;
        if (i + 1 < n)
            group |= (uint32_t)s[i + 1] << 8;
        if (i + 2 < n)
            group |= s[i + 2];
        char quad[4] = {ALPHABET[group >> 18], ALPHABET[group >> 12 & 0x3F],
                        i + 1 < n ? ALPHABET[group >> 6 & 0x3F] : '=', i + 2 < n ? ALPHABET[group & 0x3F] : '='};
        buf_append(out, quad, sizeof quad);
    }
}
