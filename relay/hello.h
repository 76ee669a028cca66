/* The TLS ClientHello's server name (hello.c), apart from its Python binding (module.c). */
#ifndef PYNGRESS_HELLO_H
#define PYNGRESS_HELLO_H

#include <stdbool.h>
#include <stddef.h>

#define HELLO_MAX_LENGTH (16 * 1024)
#define HELLO_MAX_BUFFERED (HELLO_MAX_LENGTH + 4096)
#define HELLO_MAX_NAME_BYTES 254 /* a DNS name of 253, and a trailing dot */

enum hello_verdict { HELLO_SNI, HELLO_NO_SNI, HELLO_NOT_TLS, HELLO_MALFORMED, HELLO_INCOMPLETE };

struct hello {
    char name[HELLO_MAX_NAME_BYTES + 1]; /* HELLO_SNI: lowercased, without a trailing dot, NUL-terminated */
    size_t name_len;
    size_t needed;   /* HELLO_INCOMPLETE: the bytes needed in all before anything can be decided */
    char reason[384]; /* HELLO_MALFORMED: what is wrong */
};

/* The verdict on a connection's first `len` bytes (all of them so far). */
enum hello_verdict hello_read(const unsigned char *data, size_t len, struct hello *h);

#endif
