/* JSON as Python's json.loads(bytes) reads it and json.dumps writes it back: only as much as the plugin
 * needs (top-level members of the network configuration, and the server's error object re-written).
 *
 * What json.loads accepts, and so what this reader accepts: UTF-8 (with or without a BOM), UTF-16 and
 * UTF-32 chosen by json.detect_encoding, lone surrogates ("surrogatepass"), the literals NaN, Infinity
 * and -Infinity, integers of at most 4,300 digits (Python's int conversion limit), no control characters
 * inside strings, and only space, tab, CR and LF as whitespace. Duplicate keys: the last value wins, at
 * the place of the first. Nesting is limited to JSON_MAX_DEPTH containers: Python's own limit is its
 * recursion limit (1,000), which it reaches a few levels earlier. */
#ifndef PYNGRESS_CNI_JSON_H
#define PYNGRESS_CNI_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"

#define JSON_MAX_DEPTH 1000

typedef enum { JSON_UTF8, JSON_UTF16LE, JSON_UTF16BE, JSON_UTF32LE, JSON_UTF32BE } json_encoding;

/* A place in a document: where a value starts. The document must outlive it. */
typedef struct {
    const unsigned char *data;
    size_t len;
    size_t pos;
    json_encoding enc;
} json_cursor;

/* True, with *value at the document's value, when json.loads(data) would succeed. */
bool json_load(const unsigned char *data, size_t len, json_cursor *value);

bool json_is_object(json_cursor value);
bool json_is_string(json_cursor value);
/* An int in Python's sense: an integer literal, or true/false (bool is an int subclass). */
bool json_is_int(json_cursor value);
/* The value of `key` in an object (the last one when the key repeats); false when absent. */
bool json_member(json_cursor object, const char *key, json_cursor *value);
/* A string value's text (see text.h), appended to *out. */
bool json_string(json_cursor value, buf *out);
/* json.dumps(value) appended to *out. */
bool json_dump(json_cursor value, buf *out);

#endif
