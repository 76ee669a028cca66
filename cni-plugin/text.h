/* Text as the Python plugin sees it, and the ways it turns text into bytes.
 *
 * Python strings can hold lone surrogates (from "\ud800" in JSON, from bytes that are not UTF-8 in the
 * environment), and the plugin's output depends on them, so this program holds text as "generalized
 * UTF-8": every code point in its usual UTF-8 form, a surrogate included (as ED A0..BF xx). Two texts are
 * equal exactly when the Python strings are. */
#ifndef PYNGRESS_CNI_TEXT_H
#define PYNGRESS_CNI_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

/* Whitespace as bytes.strip() and bytes.isspace() see it: space, \t, \n, \r, \v, \f. */
bool ascii_space(unsigned char c);

/* The UTF-8 sequence at s[0..n): its length (1-4) and *cp when it is valid; else 0 and *bad = the length of
 * its longest valid beginning (at least 1), which Python's decoder reports as one error. `surrogates`
 * accepts encoded surrogates (the "surrogatepass" error handler). */
size_t utf8_decode(const unsigned char *s, size_t n, bool surrogates, uint32_t *cp, size_t *bad);

/* Appends cp in (generalized) UTF-8. */
void text_put(buf *out, uint32_t cp);
/* The code point of the text at s[*i] (text this program made), advancing *i. */
uint32_t text_next(const unsigned char *s, size_t n, size_t *i);

/* Bytes from the environment as Python decodes them (UTF-8, "surrogateescape": a byte that is not part of
 * valid UTF-8 becomes U+DC80 + byte). */
void text_from_os_bytes(buf *out, const unsigned char *s, size_t n);
/* bytes.decode("utf-8", "replace"): U+FFFD for each invalid sequence. */
void text_from_utf8_replace(buf *out, const unsigned char *s, size_t n);
/* The bytes Python hands the kernel for a path (UTF-8, "surrogateescape"); false, with the message of
 * Python's UnicodeEncodeError in *err, for a surrogate that does not stand for a byte. */
bool text_to_os_bytes(const unsigned char *s, size_t n, buf *out, buf *err);

/* json.dumps(text): a JSON string literal in ASCII (ensure_ascii). */
void json_put_string(buf *out, const unsigned char *s, size_t n);
/* The Python plugin's quote() of bytes from the environment: '"' and '\' escaped, control characters and
 * undecodable bytes as \uXXXX, valid UTF-8 as it is. */
void body_put_string(buf *out, const unsigned char *s, size_t n);
/* repr(bytes): b'...' */
void bytes_repr(buf *out, const unsigned char *s, size_t n);
/* Standard base64 with padding, no line breaks (binascii.b2a_base64(newline=False)). */
void base64_put(buf *out, const unsigned char *s, size_t n);
size_t base64_length(size_t n);

#endif
