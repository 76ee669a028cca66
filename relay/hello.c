/* The TLS ClientHello's server name, which the passthrough proxy routes on.
 *
 * hello_read() is given every byte a connection has sent so far and decides from them alone, so the proxy keeps no
 * parser state: it calls again with more bytes when told how many are needed. The ClientHello may be split anywhere
 * across reads, and the handshake message may be fragmented over several TLS records (RFC 8446 section 5.1 allows
 * it; OpenSSL reassembles it): records are walked first, and the handshake message is parsed once it is whole (in
 * place when one record holds it, which is what clients send).
 *
 * Verdicts:
 * - a host_name in the first server_name extension (RFC 6066 section 3), lowercased, one trailing dot removed; the
 *   hello is well-formed up to the end of that extension, and what follows is left to the TLS server that gets the
 *   bytes (as ingress-nginx's passthrough proxy does: a second server_name reaches that server, which refuses it);
 * - no SNI: a well-formed ClientHello without one;
 * - not TLS: the first byte is not a handshake record (0x16) or the record version's major byte is not 3: plain
 *   HTTP to the HTTPS port, SSLv2-style hellos, garbage;
 * - malformed (with the reason): it claims to be TLS but is not well-formed, or is larger than the bounds below;
 * - incomplete: nothing can be decided before the connection has sent `needed` bytes in all.
 *
 * Bounds (the bytes come from the network before anything is known about the client):
 * - the handshake message may be at most HELLO_MAX_LENGTH (16 KiB, what nginx's ssl_preread reads too). Real
 *   ClientHellos are well below it (about 2 KiB with post-quantum key shares); a larger one is refused as soon as its
 *   record is in;
 * - the hello must be complete within HELLO_MAX_BUFFERED bytes, record headers included: room for a hello
 *   fragmented into hundreds of records, not for unbounded tiny records. With `needed`, a caller reparses at most
 *   once per record, so even tiny records cost little.
 *
 * Every read is bounds-checked against the length given: any input is safe (tests/unit/proxy/test_hello.py feeds it
 * random and mutated bytes, also under AddressSanitizer). */
#include <stdio.h>
#include <string.h>

#include "hello.h"

#define RECORD_HANDSHAKE 0x16
#define HANDSHAKE_CLIENT_HELLO 1
#define EXTENSION_SERVER_NAME 0
#define NAME_TYPE_HOST_NAME 0
#define MAX_RECORD_PAYLOAD (1 << 14) /* RFC 8446 section 5.1: TLSPlaintext.length MUST NOT exceed 2^14 */
#define MAX_HOST_NAME 253

static unsigned u16(const unsigned char *p) { return (unsigned)p[0] << 8 | p[1]; }

static enum hello_verdict fail(struct hello *h, const char *reason) {
    snprintf(h->reason, sizeof h->reason, "%s", reason);
    return HELLO_MALFORMED;
}

static enum hello_verdict truncated(struct hello *h, const char *field) {
    snprintf(h->reason, sizeof h->reason, "ClientHello truncated in %s", field);
    return HELLO_MALFORMED;
}

/* The host_name: ASCII, lowercased into h->name, one trailing dot dropped, DNS labels of [a-z0-9_-]{1,63}. */
static enum hello_verdict host_name(struct hello *h, const unsigned char *name, size_t len) {
    char text[HELLO_MAX_NAME_BYTES + 1];
    size_t kept = len < HELLO_MAX_NAME_BYTES ? len : HELLO_MAX_NAME_BYTES;
    for (size_t i = 0; i < len; i++)
        if (name[i] >= 0x80)
            return fail(h, "SNI host_name is not ASCII");
    for (size_t i = 0; i < kept; i++) {
        unsigned char c = name[i];
        text[i] = (char)(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
    }
    text[kept] = '\0';
    /* RFC 6066 says no trailing dot, but some clients send one; it names the same host. */
    size_t length = len > 0 && name[len - 1] == '.' ? len - 1 : len;
    bool valid = length > 0 && length <= MAX_HOST_NAME;
    size_t label = 0;
    for (size_t i = 0; valid && i < length; i++) {
        char c = text[i];
        if (c == '.') {
            valid = label > 0;
            label = 0;
        } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-') {
            valid = ++label <= 63;
        } else {
            valid = false;
        }
    }
    if (!valid || label == 0) {
        size_t shown = length < 64 ? length : 64;
        /* The name as the client sent it may hold anything: shown escaped. */
        char escaped[64 * 4 + 1];
        size_t out = 0;
        for (size_t i = 0; i < shown && i < kept; i++) {
            unsigned char c = (unsigned char)text[i];
            if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'')
                escaped[out++] = (char)c;
            else
                out += (size_t)snprintf(escaped + out, sizeof escaped - out, "\\x%02x", c);
        }
        escaped[out] = '\0';
        snprintf(h->reason, sizeof h->reason, "SNI host_name '%s' is not a valid DNS name", escaped);
        return HELLO_MALFORMED;
    }
    memcpy(h->name, text, length);
    h->name[length] = '\0';
    h->name_len = length;
    return HELLO_SNI;
}

/* The server_name extension's body[pos:end] (RFC 6066 section 3): a list of (name_type, name) entries. */
static enum hello_verdict server_name(struct hello *h, const unsigned char *body, size_t pos, size_t end) {
    if (pos + 2 > end)
        return truncated(h, "server_name_list");
    size_t list_end = pos + 2 + u16(body + pos);
    if (list_end > end)
        return truncated(h, "server_name_list");
    if (list_end < end)
        return fail(h, "bytes after server_name_list");
    pos += 2;
    if (pos == end)
        return fail(h, "empty server_name_list");
    bool found = false;
    while (pos < end) {
        if (pos + 3 > end)
            return truncated(h, "server_name");
        unsigned name_type = body[pos];
        size_t name_end = pos + 3 + u16(body + pos + 1);
        if (name_end > end)
            return truncated(h, "server_name");
        if (name_type == NAME_TYPE_HOST_NAME) { /* no other type is defined; unknown ones carry nothing to route on */
            if (found)
                return fail(h, "two host_name entries in server_name");
            if (host_name(h, body + pos + 3, name_end - pos - 3) != HELLO_SNI)
                return HELLO_MALFORMED;
            found = true;
        }
        pos = name_end;
    }
    return found ? HELLO_SNI : HELLO_NO_SNI;
}

/* The ClientHello body, body[0:end] (RFC 8446 section 4.1.2; RFC 5246 section 7.4.1.2 for older clients). */
static enum hello_verdict client_hello(struct hello *h, const unsigned char *body, size_t end) {
    if (end < 35)
        return truncated(h, "legacy_version, random and legacy_session_id");
    if (body[0] != 3)
        return fail(h, "ClientHello version is not TLS");
    if (body[34] > 32)
        return fail(h, "legacy_session_id longer than 32 bytes");
    size_t pos = 35 + (size_t)body[34];
    if (pos + 2 > end)
        return truncated(h, "cipher_suites");
    size_t length = u16(body + pos);
    if (length < 2 || length % 2) {
        snprintf(h->reason, sizeof h->reason,
                 "cipher_suites of %zu bytes (must be a non-empty list of 2-byte ids)", length);
        return HELLO_MALFORMED;
    }
    pos += 2 + length;
    if (pos + 1 > end)
        return truncated(h, "cipher_suites");
    if (body[pos] == 0)
        return fail(h, "empty legacy_compression_methods");
    pos += 1 + (size_t)body[pos];
    if (pos == end)
        return HELLO_NO_SNI; /* TLS 1.0-1.2 clients may omit the extensions block altogether */
    if (pos + 2 > end)
        return truncated(h, "legacy_compression_methods or extensions");
    size_t extensions_end = pos + 2 + u16(body + pos);
    if (extensions_end > end)
        return truncated(h, "extensions");
    if (extensions_end < end)
        return fail(h, "bytes after the extensions block");
    pos += 2;
    /* The first server_name extension decides, and the extensions after it are not read: as in ingress-nginx's own
     * passthrough proxy. The TLS server the bytes go to refuses what is wrong with them. */
    while (pos < end) {
        if (pos + 4 > end)
            return truncated(h, "extension header");
        unsigned type = u16(body + pos);
        size_t ext_end = pos + 4 + u16(body + pos + 2);
        if (ext_end > end) {
            snprintf(h->reason, sizeof h->reason, "ClientHello truncated in extension %u", type);
            return HELLO_MALFORMED;
        }
        if (type == EXTENSION_SERVER_NAME)
            return server_name(h, body, pos + 4, ext_end);
        pos = ext_end;
    }
    return HELLO_NO_SNI;
}

enum hello_verdict hello_read(const unsigned char *data, size_t len, struct hello *h) {
    h->needed = 0;
    h->name_len = 0;
    if (len == 0) {
        h->needed = 1;
        return HELLO_INCOMPLETE;
    }
    if (data[0] != RECORD_HANDSHAKE || (len > 1 && data[1] != 3))
        return HELLO_NOT_TLS;
    /* Walk the whole records: their payloads, in order, are the handshake message. */
    size_t pos = 0, message_len = 0, hello_len = 0;
    bool have_header = false;
    unsigned char header[4];
    const unsigned char *first_payload = NULL;
    size_t first_payload_len = 0;
    for (;;) {
        if (len - pos < 5) {
            h->needed = pos + 5;
            break;
        }
        const unsigned char *record = data + pos;
        if (record[0] != RECORD_HANDSHAKE) {
            snprintf(h->reason, sizeof h->reason, "record of content type %u before the ClientHello was complete",
                     record[0]);
            return HELLO_MALFORMED;
        }
        if (record[1] != 3) {
            snprintf(h->reason, sizeof h->reason, "record version %u.%u is not TLS", record[1], record[2]);
            return HELLO_MALFORMED;
        }
        size_t length = u16(record + 3);
        if (length == 0)
            return fail(h, "empty handshake record"); /* forbidden by RFC 8446 section 5.1 */
        if (length > MAX_RECORD_PAYLOAD) {
            snprintf(h->reason, sizeof h->reason, "record of %zu bytes exceeds the TLS limit of %d", length,
                     MAX_RECORD_PAYLOAD);
            return HELLO_MALFORMED;
        }
        size_t end = pos + 5 + length;
        if (end > HELLO_MAX_BUFFERED) {
            snprintf(h->reason, sizeof h->reason, "no complete ClientHello within %d bytes", HELLO_MAX_BUFFERED);
            return HELLO_MALFORMED;
        }
        if (len < end) {
            h->needed = end; /* only whole records are read: nothing changes before this one is in */
            break;
        }
        if (first_payload == NULL) {
            first_payload = record + 5;
            first_payload_len = length;
        }
        for (size_t i = 0; !have_header && i < length; i++) {
            header[message_len + i] = record[5 + i];
            if (message_len + i == 3)
                have_header = true;
        }
        message_len += length;
        pos = end;
        if (have_header && hello_len == 0) {
            if (header[0] != HANDSHAKE_CLIENT_HELLO) {
                snprintf(h->reason, sizeof h->reason, "first handshake message is of type %u, not ClientHello (1)",
                         header[0]);
                return HELLO_MALFORMED;
            }
            hello_len = (size_t)header[1] << 16 | (size_t)u16(header + 2);
            if (hello_len > HELLO_MAX_LENGTH) {
                snprintf(h->reason, sizeof h->reason, "ClientHello of %zu bytes exceeds the limit of %d", hello_len,
                         HELLO_MAX_LENGTH);
                return HELLO_MALFORMED;
            }
            hello_len += 4; /* with its header, from here on */
        }
        if (have_header && message_len >= hello_len) {
            if (first_payload_len >= hello_len) /* in one record, as clients send it: read in place */
                return client_hello(h, first_payload + 4, hello_len - 4);
            /* Fragmented: the records' payloads joined (bounded by HELLO_MAX_LENGTH + 4 above). */
            static unsigned char joined[HELLO_MAX_LENGTH + 4];
            size_t at = 0, walk = 0;
            while (at < hello_len) {
                size_t piece = u16(data + walk + 3);
                if (piece > hello_len - at)
                    piece = hello_len - at;
                memcpy(joined + at, data + walk + 5, piece);
                at += piece;
                walk += 5 + (size_t)u16(data + walk + 3);
            }
            return client_hello(h, joined + 4, hello_len - 4);
        }
    }
    if (len > HELLO_MAX_BUFFERED) {
        snprintf(h->reason, sizeof h->reason, "no complete ClientHello within %d bytes", HELLO_MAX_BUFFERED);
        return HELLO_MALFORMED;
    }
    return HELLO_INCOMPLETE;
}
